// Residual add and GELU on the GPU: grid-stride loops calling the math of elementwise.h,
// 8 elements per iteration through 16-byte loads and stores where the pointers allow.
#include "kernels/cuda/common.cuh"
#include "kernels/elementwise.h"

namespace zdp::kernels {
namespace {

// Grid-stride loops over 8-element groups with 16-byte loads and stores (cuda::load8 /
// store8) when every pointer is 16-byte aligned, then the tail (or everything, unaligned)
// one element at a time: the same per-element math either way, so the result does not
// depend on the path.
template <typename T>
__global__ void add_kernel(AddArgs a, bool vec) {
  const T* x = static_cast<const T*>(a.a);
  const T* y = static_cast<const T*>(a.b);
  T* out = static_cast<T*>(a.out);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = vec ? a.count / cuda::kVec : 0;
  for (int64_t g = first; g < groups; g += stride) {
    float xv[8], yv[8];
    T o[8];
    cuda::load8(x + g * cuda::kVec, xv);
    cuda::load8(y + g * cuda::kVec, yv);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = from_f32<T>(xv[k] + yv[k]);
    cuda::store8(out + g * cuda::kVec, o);
  }
  for (int64_t i = groups * cuda::kVec + first; i < a.count; i += stride) {
    out[i] = from_f32<T>(to_f32(x[i]) + to_f32(y[i]));
  }
}

template <typename T, bool kBackward>
__device__ __forceinline__ T gelu_one(float v, float g) {
  return from_f32<T>(kBackward ? g * gelu_tanh_grad(v) : gelu_tanh(v));
}

template <typename T, bool kBackward>
__global__ void gelu_kernel(GeluArgs a, bool vec) {
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* out = static_cast<T*>(a.out);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = vec ? a.count / cuda::kVec : 0;
  for (int64_t g = first; g < groups; g += stride) {
    float xv[8], gv[8] = {};
    T o[8];
    cuda::load8(x + g * cuda::kVec, xv);
    if (kBackward) cuda::load8(dy + g * cuda::kVec, gv);
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = gelu_one<T, kBackward>(xv[k], gv[k]);
    cuda::store8(out + g * cuda::kVec, o);
  }
  for (int64_t i = groups * cuda::kVec + first; i < a.count; i += stride) {
    out[i] = gelu_one<T, kBackward>(to_f32(x[i]), kBackward ? to_f32(dy[i]) : 0.0f);
  }
}

// One thread per row: regression outputs are narrow (tens of columns).
template <typename T>
__global__ void squared_error_kernel(SquaredErrorArgs a) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < a.rows) squared_error_row<T>(a, r);
}

template <bool kBackward>
Status launch_gelu(const GeluArgs& a, cudaStream_t stream, const char* what) {
  ZDP_RETURN_IF_ERROR(check_gelu(a, kBackward));
  if (a.count == 0) return Status::Ok();
  const bool vec = cuda::aligned16(a.x, a.out) && (!kBackward || cuda::aligned16(a.dy));
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vec ? (a.count + cuda::kVec - 1) / cuda::kVec : a.count));
  return dispatch_float(a.dtype, what, [&](auto t) {
    gelu_kernel<decltype(t), kBackward><<<grid, cuda::kBlock, 0, stream>>>(a, vec);
    return cuda::check_launch(what);
  });
}

}  // namespace

Status add_cuda(const AddArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_add(a));
  if (a.count == 0) return Status::Ok();
  const bool vec = cuda::aligned16(a.a, a.b, a.out);
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vec ? (a.count + cuda::kVec - 1) / cuda::kVec : a.count));
  return dispatch_float(a.dtype, "add", [&](auto t) {
    add_kernel<decltype(t)><<<grid, cuda::kBlock, 0, stream>>>(a, vec);
    return cuda::check_launch("add_cuda");
  });
}

Status squared_error_cuda(const SquaredErrorArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_squared_error(a));
  if (a.rows == 0) return Status::Ok();
  return dispatch_float(a.dtype, "squared_error", [&](auto t) {
    squared_error_kernel<decltype(t)><<<static_cast<unsigned>((a.rows + cuda::kBlock - 1) / cuda::kBlock), cuda::kBlock, 0,
                                         stream>>>(a);
    return cuda::check_launch("squared_error_cuda");
  });
}

Status gelu_forward_cuda(const GeluArgs& a, cudaStream_t stream) { return launch_gelu<false>(a, stream, "gelu_forward_cuda"); }
Status gelu_backward_cuda(const GeluArgs& a, cudaStream_t stream) { return launch_gelu<true>(a, stream, "gelu_backward_cuda"); }

}  // namespace zdp::kernels
