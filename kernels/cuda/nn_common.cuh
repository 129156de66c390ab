// Helpers of the model-layer kernels (layernorm, softmax, cross-entropy, embedding):
// warp and block sums, and grids of one warp per row or one thread per element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace zdp::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// A reduction over the whole block (blockDim.x a multiple of 32, at most 1024): every
// thread gets the result. `shared` holds 32 floats. Fixed order, so deterministic.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (kMax ? -3.0e38f : 0.0f);
  return kMax ? warp_max(v) : warp_sum(v);
}

// Blocks of kBlock threads for one warp per row.
inline unsigned warp_rows_grid(int64_t rows) {
  return static_cast<unsigned>((rows + kBlock / 32 - 1) / (kBlock / 32));
}
// Blocks of kBlock threads for one thread per item.
inline unsigned blocks_for(int64_t items) { return static_cast<unsigned>((items + kBlock - 1) / kBlock); }

}  // namespace zdp::kernels::cuda
