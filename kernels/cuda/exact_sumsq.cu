// exact_sumsq_cuda: kernels/exact_sumsq.h on the GPU. Each thread sums its elements into
// registers, then adds its limbs into the record with 64-bit integer atomics: integer
// addition in any order gives the same sum, so the scheduling cannot change the result.
#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/exact_sumsq.h"
#include "kernels/grad_check.h"

namespace zdp::kernels {
namespace {

template <typename T>
__global__ void exact_sumsq_kernel(const T* x, int64_t count, float scale, ExactSumSq* out) {
  int64_t limb[kExactLimbs] = {};
  int64_t bad = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride) {
    const float f = to_f32(x[k]);
    const float y = f * scale;
    if (is_nonfinite(f) || is_nonfinite(y)) {
      bad = 1;
    } else {
      exact_add_square(y, limb);
    }
  }
  for (int i = 0; i < kExactLimbs; ++i) {
    if (limb[i] != 0) {
      atomicAdd(reinterpret_cast<unsigned long long*>(&out->limb[i]), static_cast<unsigned long long>(limb[i]));
    }
  }
  if (bad != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&out->nonfinite), 1ull);
}

}  // namespace

Status exact_sumsq_cuda(const ExactSumSqArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_exact_sumsq_args(a));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.dtype, "exact_sumsq", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    const int64_t blocks = (a.count + kThreads - 1) / kThreads;
    const int grid = static_cast<int>(blocks < 1024 ? blocks : 1024);
    exact_sumsq_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(a.grad), a.count, a.scale, a.out);
    return cuda::check_launch("exact_sumsq_cuda");
  });
}

}  // namespace zdp::kernels
