// The CUDA entry points of the model-layer kernels in builds without CUDA: kUnavailable.
#include "kernels/attention_softmax.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"

namespace zdp::kernels {
namespace {

Status unavailable(const char* what) {
  return Status(StatusCode::kUnavailable, std::string(what) + ": this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
}

}  // namespace

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
