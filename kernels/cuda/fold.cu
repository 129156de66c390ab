// fold_cuda: the CUDA launcher of kernels/fold.h (grid-stride loop over fold_element).
#include <cuda_runtime.h>

#include <string>

#include "kernels/fold.h"
#include "kernels/cast.h"

namespace zdp::kernels {
namespace {

template <typename I, typename O>
__global__ void fold_kernel(const I* in, const float* acc, O* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride) {
    out[k] = fold_element<I, O>(in[k], acc[k]);
  }
}

}  // namespace

Status fold_cuda(const FoldArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_fold_args(a));
  if (a.acc == nullptr) return cast_cuda(CastArgs{a.in, a.in_dtype, a.out, a.out_dtype, a.count}, stream);
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.in_dtype, "fold input", [&](auto i) {
    using I = decltype(i);
    return dispatch_float(a.out_dtype, "fold output", [&](auto o) {
      using O = decltype(o);
      constexpr int kThreads = 256;
      const int64_t blocks = (a.count + kThreads - 1) / kThreads;
      const int grid = static_cast<int>(blocks < 4096 ? blocks : 4096);
      fold_kernel<I, O><<<grid, kThreads, 0, stream>>>(static_cast<const I*>(a.in), a.acc, static_cast<O*>(a.out),
                                                       a.count);
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) {
        return Status(StatusCode::kCudaError, std::string("fold_cuda: launch failed: ") + cudaGetErrorString(err));
      }
      return Status::Ok();
    });
  });
}

}  // namespace zdp::kernels
