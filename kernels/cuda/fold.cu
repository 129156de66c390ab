// fold_cuda: the CUDA launcher of kernels/fold.h. Grid-stride, 8 elements per thread and
// iteration with 16-byte loads and stores where all three pointers allow (the cast's
// scheme): the engine folds every element of every bucket each step (10 bytes an element
// from bf16 into fp32), its largest kernel after the optimizer's, and one 2-byte load per
// thread kept too few bytes in flight. The same fold_element as the CPU twin.
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cast.h"
#include "kernels/cuda/common.cuh"
#include "kernels/fold.h"

namespace zdp::kernels {
namespace {

using cuda::kVec;

template <typename I, typename O>
__global__ void __launch_bounds__(cuda::kBlock)
    fold_kernel(const I* in, const float* acc, O* out, int64_t count, int64_t num_vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // `out` may alias `in` or `acc` element for element: each thread reads its 8 elements
  // before it writes them.
  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    float x[kVec], a[kVec];
    cuda::load8(in + vi * kVec, x);
    cuda::load8(acc + vi * kVec, a);
    if constexpr (std::is_same_v<O, float>) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = x[e] + a[e];
      cuda::store8(out + vi * kVec, x);
    } else {
      O y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) y[e] = from_f32<O>(x[e] + a[e]);
      cuda::store8(out + vi * kVec, y);
    }
  }
  for (int64_t k = num_vec * kVec + tid; k < count; k += stride) out[k] = fold_element<I, O>(in[k], acc[k]);
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
      const bool vector = cuda::aligned16(a.in, a.acc, a.out);
      const int64_t num_vec = vector ? a.count / kVec : 0;
      ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vector ? num_vec : a.count));
      fold_kernel<I, O><<<grid, cuda::kBlock, 0, stream>>>(static_cast<const I*>(a.in), a.acc, static_cast<O*>(a.out),
                                                           a.count, num_vec);
      return cuda::check_launch("fold_cuda");
    });
  });
}

}  // namespace zdp::kernels
