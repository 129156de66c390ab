// The CUDA entry points of kernels/ in builds without CUDA: each returns kUnavailable, so
// that engine code calling them compiles once for every build and fails with a clear message.
#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/gemm.h"
#include "kernels/grad_check.h"
#include "kernels/sgd.h"

namespace zdp::kernels {
namespace {

Status unavailable(const char* what) {
  return Status(StatusCode::kUnavailable, std::string(what) + ": this zdp build has no CUDA (configure with ZDP_CUDA=ON)");
}

}  // namespace

Status adamw_update_cuda(const AdamWArgs&, cudaStream_t) { return unavailable("adamw_update_cuda"); }
Status sgd_update_cuda(const SgdArgs&, cudaStream_t) { return unavailable("sgd_update_cuda"); }
Status cast_cuda(const CastArgs&, cudaStream_t) { return unavailable("cast_cuda"); }
Status scale_cuda(const ScaleArgs&, cudaStream_t) { return unavailable("scale_cuda"); }
int64_t grad_check_workspace_bytes(int64_t) { return 0; }
Status grad_check_cuda(const GradCheckArgs&, void*, int64_t, cudaStream_t) { return unavailable("grad_check_cuda"); }
StatusOr<std::unique_ptr<Gemm>> make_cublaslt_gemm(void*, int64_t) { return unavailable("make_cublaslt_gemm"); }

}  // namespace zdp::kernels
