// Residual add and GELU on the GPU: grid-stride loops calling the math of elementwise.h.
#include "kernels/cuda/common.cuh"
#include "kernels/elementwise.h"

namespace zdp::kernels {
namespace {

template <typename T>
__global__ void add_kernel(AddArgs a) {
  const T* x = static_cast<const T*>(a.a);
  const T* y = static_cast<const T*>(a.b);
  T* out = static_cast<T*>(a.out);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_f32<T>(to_f32(x[i]) + to_f32(y[i]));
  }
}

template <typename T, bool kBackward>
__global__ void gelu_kernel(GeluArgs a) {
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* out = static_cast<T*>(a.out);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[i]);
    out[i] = from_f32<T>(kBackward ? to_f32(dy[i]) * gelu_tanh_grad(v) : gelu_tanh(v));
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
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(a.count));
  return dispatch_float(a.dtype, what, [&](auto t) {
    gelu_kernel<decltype(t), kBackward><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch(what);
  });
}

}  // namespace

Status add_cuda(const AddArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_add(a));
  if (a.count == 0) return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(a.count));
  return dispatch_float(a.dtype, "add", [&](auto t) {
    add_kernel<decltype(t)><<<grid, cuda::kBlock, 0, stream>>>(a);
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
