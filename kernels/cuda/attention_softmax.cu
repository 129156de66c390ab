// Causal softmax on the GPU: one warp per row of scores (rows of all heads).
#include "kernels/attention_softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels {
namespace {

template <typename T>
__global__ void causal_softmax_kernel(CausalSoftmaxArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.heads * a.seq) return;
  const int64_t i = row % a.seq;
  const T* s = static_cast<const T*>(a.scores) + row * a.seq;
  T* p = static_cast<T*>(a.probs) + row * a.seq;
  float m = -3.0e38f;
  for (int64_t j = lane; j <= i; j += 32) m = fmaxf(m, a.scale * to_f32(s[j]));
  m = cuda::warp_max(m);
  float sum = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) sum += exp_branchless(a.scale * to_f32(s[j]) - m);
  const float inv = 1.0f / cuda::warp_sum(sum);
  for (int64_t j = lane; j < a.seq; j += 32) {
    p[j] = from_f32<T>(j <= i ? causal_softmax_prob(a.scale * to_f32(s[j]), m, inv) : 0.0f);
  }
}

template <typename T>
__global__ void causal_softmax_backward_kernel(CausalSoftmaxBackwardArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.heads * a.seq) return;
  const int64_t i = row % a.seq, base = row * a.seq;
  const T* p = static_cast<const T*>(a.probs) + base;
  const T* dp = static_cast<const T*>(a.dprobs) + base;
  T* ds = static_cast<T*>(a.dscores) + base;
  float dot = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) dot += to_f32(p[j]) * to_f32(dp[j]);
  dot = cuda::warp_sum(dot);
  for (int64_t j = lane; j < a.seq; j += 32) {
    ds[j] = from_f32<T>(j <= i ? causal_softmax_dscore(to_f32(p[j]), to_f32(dp[j]), dot, a.scale) : 0.0f);
  }
}

}  // namespace

Status causal_softmax_forward_cuda(const CausalSoftmaxArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax(a));
  if (a.heads == 0) return Status::Ok();
  return dispatch_float(a.dtype, "causal_softmax", [&](auto t) {
    causal_softmax_kernel<decltype(t)><<<cuda::warp_rows_grid(a.heads * a.seq), cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("causal_softmax_forward_cuda");
  });
}

Status causal_softmax_backward_cuda(const CausalSoftmaxBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax_backward(a));
  if (a.heads == 0) return Status::Ok();
  return dispatch_float(a.dtype, "causal_softmax_backward", [&](auto t) {
    causal_softmax_backward_kernel<decltype(t)><<<cuda::warp_rows_grid(a.heads * a.seq), cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("causal_softmax_backward_cuda");
  });
}

}  // namespace zdp::kernels
