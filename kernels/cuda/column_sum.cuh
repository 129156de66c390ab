// The first pass of the fixed-order column sums (kernels/common.h: kColumnSumLanes,
// column_sum_row_chunk), shared by the bias gradients and LayerNorm's dweight/dbias: a
// block (32, kColumnSumLanes) sums one chunk of rows for 32 x N columns, thread (x, y)
// the rows y, y + lanes, ... of the chunk in row order for its N columns (N = 8: one
// 16-byte load a row per input), then lane 0 adds the lanes in lane order.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels::cuda {

inline constexpr int kColumnSumColLanes = 32;  // threads across the columns of a block

// S sums at once: terms(r, c0, t) fills t[s][0..N) with row r's terms of sum s for the
// columns c0 .. c0 + N (inputs read once for all S). Returns true on the one thread per
// column group (y == 0, c0 < cols) whose acc then holds the chunk's sums; call it from
// every thread of the block (it has a barrier), once per kernel (its shared memory is
// read after that barrier with none behind it).
template <int S, int N, typename Terms>
__device__ __forceinline__ bool chunk_column_sums(const Terms& terms, int64_t r0, int64_t r1, int64_t c0, int64_t cols,
                                                  float (&acc)[S][8]) {
  __shared__ float lanes[S][kColumnSumLanes][kColumnSumColLanes * 8];
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[s][i] = 0.0f;
  }
  if (c0 < cols) {
    float t[S][8];
#pragma unroll 4  // several rows' loads in flight; the adds stay in row order
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColumnSumLanes) {
      terms(r, c0, t);
#pragma unroll
      for (int s = 0; s < S; ++s) {
#pragma unroll
        for (int i = 0; i < N; ++i) acc[s][i] += t[s][i];
      }
    }
  }
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int i = 0; i < N; ++i) lanes[s][threadIdx.y][threadIdx.x * N + i] = acc[s][i];
  }
  __syncthreads();
  if (threadIdx.y != 0 || c0 >= cols) return false;
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float sum = lanes[s][0][threadIdx.x * N + i];
#pragma unroll
      for (int l = 1; l < kColumnSumLanes; ++l) sum += lanes[s][l][threadIdx.x * N + i];
      acc[s][i] = sum;
    }
  }
  return true;
}

// The second pass for column c: partials[k * cols + c] over the chunks k in chunk order.
__device__ __forceinline__ float sum_of_chunks(const float* partials, int64_t chunks, int64_t cols, int64_t c) {
  float s = partials[c];
#pragma unroll 8  // the loads in flight together; the adds stay in chunk order
  for (int64_t k = 1; k < chunks; ++k) s += partials[k * cols + c];
  return s;
}

}  // namespace zdp::kernels::cuda
