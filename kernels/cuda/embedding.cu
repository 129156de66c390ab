// Embeddings on the GPU: one warp per output row, its lanes across the columns (8 a lane
// and step through 16-byte loads and stores where the rows allow, else 1), so that no
// thread divides a flat index into (row, column). The backward sums each dwte element
// over its token's positions (the host-built index) and each dwpe element over the
// batch, in order: deterministic, no atomics, the CPU twin's order and bits. Its warps
// own one chunk of a row's columns each (32 x 8 = 256 columns), not the whole row: a
// frequent token (" the", ",": 3-4% of real text, ~600 positions of a 16k-token
// micro-batch) makes its row's sum a chain of dependent loads as long as its positions,
// and a warp walking d = 768 in three chunks made that chain three times as long.
// On an H200 (stop 26) the version with a thread per element and a 64-bit division and
// remainder per element took 0.185 ms a backward call for gpt2-124m, against 0.04 ms for
// its 232 MB at the memory rate.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"
#include "kernels/embedding.h"

namespace zdp::kernels {
namespace {

// out[n] = wte[tokens[n]] + wpe[n % seq], a warp per position n.
template <typename T, int N>
__global__ void embedding_kernel(EmbeddingArgs a) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= a.batch * a.seq) return;
  const int lane = threadIdx.x % 32;
  const T* te = static_cast<const T*>(a.wte) + static_cast<int64_t>(a.tokens[n]) * a.dim;
  const T* pe = static_cast<const T*>(a.wpe) + (n % a.seq) * a.dim;
  T* out = static_cast<T*>(a.out) + n * a.dim;
  float tv[8], pv[8];
  for (int64_t c = lane * N; c < a.dim; c += 32 * N) {
    cuda::load_n<N>(te + c, tv);
    cuda::load_n<N>(pe + c, pv);
#pragma unroll
    for (int k = 0; k < N; ++k) tv[k] += pv[k];
    cuda::store_n<N>(out + c, tv);
  }
}

// Rows [0, vocab) are dwte's, rows [vocab, vocab + seq) dwpe's; a warp per (row, chunk
// of 32 x N columns). A dwte row's positions are read 32 at a time, a lane each, and
// handed round the warp by shuffles: the loads of dout's rows then depend on no load of
// `order` inside the loop, and the unrolled loop keeps several in flight (a frequent
// token's chain was two dependent loads a position). The sum's order is the positions',
// as the CPU twin's.
template <typename T, int N>
__global__ void embedding_backward_kernel(EmbeddingBackwardArgs a, int64_t chunks) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t row = w / chunks;  // the same for the warp's 32 lanes: they return together
  if (row >= a.vocab + a.seq) return;
  const int lane = threadIdx.x % 32;
  const int64_t c = (w % chunks) * (32 * N) + lane * N;
  const bool in_row = c < a.dim;  // the last chunk's lanes past the row's end still shuffle
  const T* dout = static_cast<const T*>(a.dout);
  float s[8], v[8];
#pragma unroll
  for (int k = 0; k < N; ++k) s[k] = 0.0f;
  if (row < a.vocab) {
    const int32_t k0 = a.offsets[row], k1 = a.offsets[row + 1];
    if (a.dwte_base != nullptr && in_row) cuda::load_n<N>(a.dwte_base + row * a.dim + c, s);
    for (int32_t base = k0; base < k1; base += 32) {
      const int32_t mine = base + lane < k1 ? a.order[base + lane] : 0;
      const int count = k1 - base < 32 ? k1 - base : 32;
#pragma unroll 8
      for (int i = 0; i < count; ++i) {
        const int32_t position = __shfl_sync(0xffffffffu, mine, i);
        if (!in_row) continue;
        cuda::load_n<N>(dout + static_cast<int64_t>(position) * a.dim + c, v);
#pragma unroll
        for (int k = 0; k < N; ++k) s[k] += v[k];
      }
    }
    if (in_row) cuda::store_n<N>(static_cast<T*>(a.dwte) + row * a.dim + c, s);
  } else if (in_row) {
    const int64_t t = row - a.vocab;
    for (int64_t b = 0; b < a.batch; ++b) {
      cuda::load_n<N>(dout + (b * a.seq + t) * a.dim + c, v);
#pragma unroll
      for (int k = 0; k < N; ++k) s[k] += v[k];
    }
    cuda::store_n<N>(static_cast<T*>(a.dwpe) + t * a.dim + c, s);
  }
}

}  // namespace

Status embedding_forward_cuda(const EmbeddingArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_embedding(a));
  if (a.batch == 0) return Status::Ok();
  const bool vec = a.dim % 8 == 0 && cuda::aligned16(a.wte, a.wpe, a.out);
  return dispatch_float(a.dtype, "embedding", [&](auto t) {
    using T = decltype(t);
    const unsigned grid = cuda::warp_rows_grid(a.batch * a.seq);
    if (vec) embedding_kernel<T, 8><<<grid, cuda::kBlock, 0, stream>>>(a);
    else embedding_kernel<T, 1><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("embedding_forward_cuda");
  });
}

Status embedding_backward_cuda(const EmbeddingBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_embedding_backward(a));
  if (a.vocab + a.seq == 0) return Status::Ok();
  const bool vec = a.dim % 8 == 0 && cuda::aligned16(a.dout, a.dwte, a.dwpe) &&
                   (a.dwte_base == nullptr || cuda::aligned16(a.dwte_base));
  return dispatch_float(a.dtype, "embedding_backward", [&](auto t) {
    using T = decltype(t);
    const int64_t per_chunk = 32 * (vec ? 8 : 1);
    const int64_t chunks = std::max<int64_t>(1, (a.dim + per_chunk - 1) / per_chunk);
    const unsigned grid = cuda::warp_rows_grid((a.vocab + a.seq) * chunks);
    if (vec) embedding_backward_kernel<T, 8><<<grid, cuda::kBlock, 0, stream>>>(a, chunks);
    else embedding_backward_kernel<T, 1><<<grid, cuda::kBlock, 0, stream>>>(a, chunks);
    return cuda::check_launch("embedding_backward_cuda");
  });
}

}  // namespace zdp::kernels
