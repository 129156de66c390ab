// The CUDA entry points of kernels/ in builds without CUDA: each returns kUnavailable, so
// that engine code calling them compiles once for every build and fails with a clear message.
#include "kernels/adamw.h"
#include "kernels/attention_softmax.h"
#include "kernels/bias_grad.h"
#include "kernels/cast.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fold.h"
#include "kernels/gemm.h"
#include "kernels/grad_check.h"
#include "kernels/layernorm.h"
#include "kernels/loss_sum.h"
#include "kernels/quantize.h"
#include "kernels/sgd.h"
#include "kernels/step_decision.h"

namespace zdp::kernels {
namespace {

Status unavailable(const char* what) {
  return Status(StatusCode::kUnavailable, std::string(what) + ": this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
}

}  // namespace

Status adamw_update_cuda(const AdamWArgs&, cudaStream_t) { return unavailable("adamw_update_cuda"); }
Status sgd_update_cuda(const SgdArgs&, cudaStream_t) { return unavailable("sgd_update_cuda"); }
Status cast_cuda(const CastArgs&, cudaStream_t) { return unavailable("cast_cuda"); }
Status fold_cuda(const FoldArgs&, cudaStream_t) { return unavailable("fold_cuda"); }
Status bias_grad_cuda(const BiasGradArgs&, cudaStream_t) { return unavailable("bias_grad_cuda"); }
Status quantize_cuda(const QuantizeArgs&, cudaStream_t) { return unavailable("quantize_cuda"); }
Status dequant_sum_cuda(const DequantSumArgs&, cudaStream_t) { return unavailable("dequant_sum_cuda"); }
Status dequantize_cuda(const DequantizeArgs&, cudaStream_t) { return unavailable("dequantize_cuda"); }
Status scale_cuda(const ScaleArgs&, cudaStream_t) { return unavailable("scale_cuda"); }
Status grad_check_cuda(const GradCheckArgs&, void*, int64_t, cudaStream_t) { return unavailable("grad_check_cuda"); }
Status decide_step_cuda(const StepDecisionArgs&, cudaStream_t) { return unavailable("decide_step_cuda"); }
Status exact_sumsq_cuda(const ExactSumSqArgs&, cudaStream_t) { return unavailable("exact_sumsq_cuda"); }
Status loss_sum_cuda(const LossSumArgs&, cudaStream_t) { return unavailable("loss_sum_cuda"); }
StatusOr<std::unique_ptr<Gemm>> make_cublaslt_gemm(void*, int64_t, bool) { return unavailable("make_cublaslt_gemm"); }
std::string gpu_gemm_library() { return ""; }

// The model-layer kernels (dp-train's layers).
Status layernorm_forward_cuda(const LayerNormArgs&, cudaStream_t) { return unavailable("layernorm_forward_cuda"); }
Status layernorm_backward_cuda(const LayerNormBackwardArgs&, cudaStream_t) { return unavailable("layernorm_backward_cuda"); }
Status add_cuda(const AddArgs&, cudaStream_t) { return unavailable("add_cuda"); }
Status gelu_forward_cuda(const GeluArgs&, cudaStream_t) { return unavailable("gelu_forward_cuda"); }
Status gelu_backward_cuda(const GeluArgs&, cudaStream_t) { return unavailable("gelu_backward_cuda"); }
Status squared_error_cuda(const SquaredErrorArgs&, cudaStream_t) { return unavailable("squared_error_cuda"); }
Status causal_softmax_forward_cuda(const CausalSoftmaxArgs&, cudaStream_t) { return unavailable("causal_softmax_forward_cuda"); }
Status causal_softmax_backward_cuda(const CausalSoftmaxBackwardArgs&, cudaStream_t) {
  return unavailable("causal_softmax_backward_cuda");
}
Status cross_entropy_cuda(const CrossEntropyArgs&, cudaStream_t) { return unavailable("cross_entropy_cuda"); }
Status embedding_forward_cuda(const EmbeddingArgs&, cudaStream_t) { return unavailable("embedding_forward_cuda"); }
Status embedding_backward_cuda(const EmbeddingBackwardArgs&, cudaStream_t) { return unavailable("embedding_backward_cuda"); }

}  // namespace zdp::kernels
