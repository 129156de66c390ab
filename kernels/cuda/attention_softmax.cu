// Causal softmax on the GPU: one warp per row of scores (rows of all heads), 16-byte
// loads and stores where the rows allow.
#include "kernels/attention_softmax.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels {
namespace {

// A warp per row; each lane takes N consecutive scores per step (N = 8: 16-byte loads and
// stores, rows of 8k scores at aligned addresses; N = 1 otherwise). Keys past the query
// (j > i) are loaded with their group but masked out of every sum.
template <typename T, int N>
__global__ void causal_softmax_kernel(CausalSoftmaxArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.heads * a.seq) return;
  const int64_t i = row % a.seq;
  const T* s = static_cast<const T*>(a.scores) + row * a.seq;
  T* p = static_cast<T*>(a.probs) + row * a.seq;
  float v[8];
  float m = -3.0e38f;
  for (int64_t j = lane * N; j <= i; j += 32 * N) {
    cuda::load_n<N>(s + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) m = j + k <= i ? fmaxf(m, a.scale * v[k]) : m;
  }
  m = cuda::warp_max(m);
  float sum = 0.0f;
  for (int64_t j = lane * N; j <= i; j += 32 * N) {
    cuda::load_n<N>(s + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) sum += j + k <= i ? exp_branchless(a.scale * v[k] - m) : 0.0f;
  }
  const float inv = 1.0f / cuda::warp_sum(sum);
  for (int64_t j = lane * N; j < a.seq; j += 32 * N) {
    cuda::load_n<N>(s + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = j + k <= i ? causal_softmax_prob(a.scale * v[k], m, inv) : 0.0f;
    cuda::store_n<N>(p + j, v);
  }
}

template <typename T, int N>
__global__ void causal_softmax_backward_kernel(CausalSoftmaxBackwardArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.heads * a.seq) return;
  const int64_t i = row % a.seq, base = row * a.seq;
  const T* p = static_cast<const T*>(a.probs) + base;
  const T* dp = static_cast<const T*>(a.dprobs) + base;
  T* ds = static_cast<T*>(a.dscores) + base;
  float pv[8], gv[8];
  float dot = 0.0f;
  for (int64_t j = lane * N; j <= i; j += 32 * N) {
    cuda::load_n<N>(p + j, pv);
    cuda::load_n<N>(dp + j, gv);
#pragma unroll
    for (int k = 0; k < N; ++k) dot += j + k <= i ? pv[k] * gv[k] : 0.0f;
  }
  dot = cuda::warp_sum(dot);
  for (int64_t j = lane * N; j < a.seq; j += 32 * N) {
    cuda::load_n<N>(p + j, pv);
    cuda::load_n<N>(dp + j, gv);
#pragma unroll
    for (int k = 0; k < N; ++k) pv[k] = j + k <= i ? causal_softmax_dscore(pv[k], gv[k], dot, a.scale) : 0.0f;
    cuda::store_n<N>(ds + j, pv);
  }
}

}  // namespace

Status causal_softmax_forward_cuda(const CausalSoftmaxArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax(a));
  if (a.heads == 0) return Status::Ok();
  const bool vec = a.seq % 8 == 0 && cuda::aligned16(a.scores, a.probs);
  return dispatch_float(a.dtype, "causal_softmax", [&](auto t) {
    using T = decltype(t);
    const unsigned grid = cuda::warp_rows_grid(a.heads * a.seq);
    if (vec) causal_softmax_kernel<T, 8><<<grid, cuda::kBlock, 0, stream>>>(a);
    else causal_softmax_kernel<T, 1><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("causal_softmax_forward_cuda");
  });
}

Status causal_softmax_backward_cuda(const CausalSoftmaxBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax_backward(a));
  if (a.heads == 0) return Status::Ok();
  const bool vec = a.seq % 8 == 0 && cuda::aligned16(a.probs, a.dprobs, a.dscores);
  return dispatch_float(a.dtype, "causal_softmax_backward", [&](auto t) {
    using T = decltype(t);
    const unsigned grid = cuda::warp_rows_grid(a.heads * a.seq);
    if (vec) causal_softmax_backward_kernel<T, 8><<<grid, cuda::kBlock, 0, stream>>>(a);
    else causal_softmax_backward_kernel<T, 1><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("causal_softmax_backward_cuda");
  });
}

}  // namespace zdp::kernels
