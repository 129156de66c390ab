// Casts and in-place scaling on the GPU: grid-stride, 8 elements per thread and iteration
// with 16-byte loads/stores, calling cast_element() / scale_element() (kernels/cast.h).
#include <type_traits>

#include "kernels/cast.h"
#include "kernels/cuda/common.cuh"

namespace zdp::kernels {
namespace {

using cuda::kVec;

template <typename S, typename D>
__global__ void __launch_bounds__(cuda::kBlock) cast_kernel(const S* src, D* dst, int64_t count, int64_t num_vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    float x[kVec];
    cuda::load8(src + vi * kVec, x);
    if constexpr (std::is_same_v<D, float>) {
      cuda::store8(dst + vi * kVec, x);
    } else {
      D y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) y[e] = from_f32<D>(x[e]);
      cuda::store8(dst + vi * kVec, y);
    }
  }
  for (int64_t i = num_vec * kVec + tid; i < count; i += stride) dst[i] = cast_element<S, D>(src[i]);
}

template <typename T>
__global__ void __launch_bounds__(cuda::kBlock) scale_kernel(T* data, int64_t count, int64_t num_vec, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    float x[kVec];
    cuda::load8(data + vi * kVec, x);
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = x[e] * scale;
      cuda::store8(data + vi * kVec, x);
    } else {
      T y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) y[e] = from_f32<T>(x[e] * scale);
      cuda::store8(data + vi * kVec, y);
    }
  }
  for (int64_t i = num_vec * kVec + tid; i < count; i += stride) data[i] = scale_element(data[i], scale);
}

}  // namespace

Status cast_cuda(const CastArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_cast_args(a));
  if (a.count == 0 || a.src == a.dst) return Status::Ok();
  if (a.src_dtype == a.dst_dtype) {
    ZDP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(a.dst, a.src, static_cast<size_t>(a.count) * dtype_size(a.src_dtype), cudaMemcpyDeviceToDevice, stream));
    return Status::Ok();
  }
  return dispatch_float(a.src_dtype, "cast src", [&](auto s) {
    using S = decltype(s);
    return dispatch_float(a.dst_dtype, "cast dst", [&](auto d) {
      using D = decltype(d);
      const bool vector = cuda::aligned16(a.src, a.dst);
      const int64_t num_vec = vector ? a.count / kVec : 0;
      ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vector ? num_vec : a.count));
      cast_kernel<S, D><<<grid, cuda::kBlock, 0, stream>>>(static_cast<const S*>(a.src), static_cast<D*>(a.dst), a.count,
                                                          num_vec);
      return cuda::check_launch("cast_cuda");
    });
  });
}

Status scale_cuda(const ScaleArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_scale_args(a));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.dtype, "scale", [&](auto t) {
    using T = decltype(t);
    const bool vector = cuda::aligned16(a.data);
    const int64_t num_vec = vector ? a.count / kVec : 0;
    ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vector ? num_vec : a.count));
    scale_kernel<T><<<grid, cuda::kBlock, 0, stream>>>(static_cast<T*>(a.data), a.count, num_vec, a.scale);
    return cuda::check_launch("scale_cuda");
  });
}

}  // namespace zdp::kernels
