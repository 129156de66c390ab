// One pass over a gradient slice: the sum of squares (for global-norm clipping) and a
// non-finite flag (fp16 overflow detection), in a fixed summation order, so the result is
// the same bits on every run, for every CPU thread count, and on CPU and GPU alike.
//
// The order (both launchers implement exactly this; tests/gpu/ compares their bits):
//  1. The slice is cut into chunks of kGradChunk elements; chunk c's partial sum is
//     independent of all other chunks. Elements past the end count as 0.
//  2. Inside a chunk, with W = kGradLanes * V (V = elements per 16-byte load: 4 for fp32,
//     8 for 16-bit types), accumulator k in [0, W) adds x[row * W + k]^2 row by row,
//     starting from 0 (on the GPU: lane k / V of a warp, register k % V).
//  3. Each lane folds its V registers by halving (a[i] += a[i + s], s = V/2, ..., 1),
//     then the 32 lanes fold by halving the same way (a warp's shuffle-down tree).
//  4. Chunk partials fold pairwise, adjacent pairs level by level (p[2i] + p[2i+1], an odd
//     last one passing up unchanged) until one value is left.
// Squares are x * x rounded, then added (no fused multiply-add anywhere).
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

inline constexpr int64_t kGradChunk = 4096;
inline constexpr int kGradLanes = 32;

// Laid out as two floats so that one fp32 all-reduce (sum) over ranks combines the
// slices' results: a global sum of squares, and a flag that is > 0 when any rank saw a
// non-finite value.
struct GradStats {
  float sum_sq = 0.0f;
  float nonfinite = 0.0f;  // 1 when the slice holds an inf or NaN, else 0
};
static_assert(sizeof(GradStats) == 2 * sizeof(float), "GradStats is reduced as 2 floats");

struct GradCheckArgs {
  const void* grad = nullptr;
  DType dtype = DType::kF32;  // fp32, bf16 or fp16
  int64_t count = 0;
  // The scale the gradient is checked at: squares of (x * scale), e.g. 1 / loss_scale.
  // (The non-finite flag looks at the stored x.)
  float scale = 1.0f;
  GradStats* out = nullptr;  // host memory (CPU) or device memory (CUDA)
};

// Elements per 16-byte load for a storage type (V above).
template <typename T>
inline constexpr int kGradVecWidth = static_cast<int>(16 / sizeof(T));

ZDP_HD bool is_nonfinite(float x) { return (float_bits(x) & 0x7f800000u) == 0x7f800000u; }

ZDP_HD float scaled_square(float x, float scale) {
  const float y = x * scale;
  return y * y;
}

// Step 4 on `count` partials in place (count >= 1); returns the root. Host and device.
ZDP_HD float fold_adjacent_pairs(float* partials, int64_t count) {
  while (count > 1) {
    const int64_t half = (count + 1) / 2;
    for (int64_t i = 0; i < half; ++i) {
      partials[i] = 2 * i + 1 < count ? partials[2 * i] + partials[2 * i + 1] : partials[2 * i];
    }
    count = half;
  }
  return partials[0];
}

// Runs on the calling thread's OpenMP team; bitwise the same for any thread count.
Status grad_check_cpu(const GradCheckArgs& args);

// The CUDA launcher's second pass: blocks of 1024 threads fold this many chunk partials
// each, level after level, until one is left.
inline constexpr int64_t kGradFoldWidth = 2048;

// Device-memory scratch the CUDA launcher needs for `count` elements: the chunk partials,
// one level of folded partials (each with its flag word) and 16 bytes. Arithmetic only,
// the same in every build, so that a machine without CUDA plans a GPU's buffers as one
// with it does (engine/src/buffer_plan.cc).
inline int64_t grad_check_workspace_bytes(int64_t count) {
  const int64_t chunks = (count + kGradChunk - 1) / kGradChunk;
  const int64_t folds = (chunks + kGradFoldWidth - 1) / kGradFoldWidth;
  return 8 * (chunks + folds) + 16;
}

// Enqueues the check on `stream`; `workspace` is device memory of at least
// grad_check_workspace_bytes(count). kUnavailable in builds without CUDA.
Status grad_check_cuda(const GradCheckArgs& args, void* workspace, int64_t workspace_bytes, cudaStream_t stream);

}  // namespace zdp::kernels
