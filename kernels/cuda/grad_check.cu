// Gradient sum of squares and non-finite flag on the GPU, in the order kernels/grad_check.h
// defines: one warp per chunk (lane k/V, register k%V; 16-byte loads), then the chunk
// partials folded in adjacent pairs by blocks of 2048, level after level.
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/grad_check.h"

namespace zdp::kernels {
namespace {

constexpr int kFoldThreads = 1024;
constexpr int kFoldWidth = static_cast<int>(kGradFoldWidth);  // partials folded per block: 11 tree levels
static_assert(kFoldWidth == 2 * kFoldThreads, "each fold thread starts with two partials");

template <typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&x)[kGradVecWidth<T>]) {
  if constexpr (std::is_same_v<T, float>) cuda::load4(p, x);
  else cuda::load8(p, x);
}

template <typename T>
__global__ void __launch_bounds__(cuda::kBlock) chunk_kernel(const T* x, int64_t count, float scale,
                                                             int64_t num_chunks, bool vector, float* partials,
                                                             uint32_t* flags) {
  constexpr int kV = kGradVecWidth<T>;
  constexpr int kW = kGradLanes * kV;
  const int lane = threadIdx.x % kGradLanes;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kGradLanes;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kGradLanes;
  for (int64_t c = warp; c < num_chunks; c += warps) {  // uniform per warp
    const T* chunk = x + c * kGradChunk;
    const int64_t n = min(kGradChunk, count - c * kGradChunk);
    float acc[kV] = {};
    uint32_t bad = 0;
    for (int64_t row = 0; row < n; row += kW) {
      const int64_t k0 = row + lane * kV;
      float v[kV];
      if (vector && k0 + kV <= n) {
        load_vec(chunk + k0, v);
      } else {
#pragma unroll
        for (int e = 0; e < kV; ++e) v[e] = k0 + e < n ? to_f32(chunk[k0 + e]) : 0.0f;  // 0 adds nothing
      }
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        bad |= is_nonfinite(v[e]) ? 1u : 0u;
        acc[e] = acc[e] + scaled_square(v[e], scale);
      }
    }
#pragma unroll
    for (int s = kV / 2; s >= 1; s /= 2) {
#pragma unroll
      for (int i = 0; i < s; ++i) acc[i] = acc[i] + acc[i + s];
    }
    float sum = acc[0];
#pragma unroll
    for (int s = kGradLanes / 2; s >= 1; s /= 2) sum = sum + __shfl_down_sync(0xffffffffu, sum, s);
    bad = __any_sync(0xffffffffu, bad) ? 1u : 0u;
    if (lane == 0) {
      partials[c] = sum;
      flags[c] = bad;
    }
  }
}

// Folds in[base, base + 2048) (zeros past count, which leave every sum unchanged) into
// one value per block; the last level writes the GradStats.
__global__ void __launch_bounds__(kFoldThreads) fold_kernel(const float* in, const uint32_t* in_flags, int64_t count,
                                                            float* out, uint32_t* out_flags, GradStats* stats) {
  __shared__ float s[kFoldWidth];
  __shared__ uint32_t f[kFoldWidth];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kFoldWidth;
  for (int i = threadIdx.x; i < kFoldWidth; i += blockDim.x) {
    const bool present = base + i < count;
    s[i] = present ? in[base + i] : 0.0f;
    f[i] = present ? in_flags[base + i] : 0u;
  }
  __syncthreads();
  for (int stride = 1; stride < kFoldWidth; stride *= 2) {
    for (int t = threadIdx.x; t < kFoldWidth / (2 * stride); t += blockDim.x) {
      const int i = 2 * stride * t;
      s[i] = s[i] + s[i + stride];
      f[i] |= f[i + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (stats) {
    stats->sum_sq = s[0];
    stats->nonfinite = f[0] ? 1.0f : 0.0f;
  } else {
    out[blockIdx.x] = s[0];
    out_flags[blockIdx.x] = f[0];
  }
}

int64_t num_chunks(int64_t count) { return (count + kGradChunk - 1) / kGradChunk; }
int64_t num_folds(int64_t chunks) { return (chunks + kFoldWidth - 1) / kFoldWidth; }

}  // namespace

Status grad_check_cuda(const GradCheckArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if (a.count < 0 || !a.out || (a.count > 0 && !a.grad)) {
    return Status(StatusCode::kInvalidArgument, "grad_check_cuda: null grad/out or negative count");
  }
  if (a.count == 0) {
    ZDP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(a.out, 0, sizeof(GradStats), stream));  // {0.0f, 0.0f}
    return Status::Ok();
  }
  const int64_t needed = grad_check_workspace_bytes(a.count);
  if (!workspace || workspace_bytes < needed) {
    return Status(StatusCode::kInvalidArgument, "grad_check_cuda: workspace of " + std::to_string(workspace_bytes) +
                                                    " bytes, " + std::to_string(needed) + " needed");
  }
  const int64_t chunks = num_chunks(a.count);
  float* partials = static_cast<float*>(workspace);
  uint32_t* flags = reinterpret_cast<uint32_t*>(partials + chunks);
  float* level = reinterpret_cast<float*>(flags + chunks);
  uint32_t* level_flags = reinterpret_cast<uint32_t*>(level + num_folds(chunks));

  ZDP_RETURN_IF_ERROR(dispatch_float(a.dtype, "grad_check", [&](auto t) {
    using T = decltype(t);
    const bool vector = cuda::aligned16(a.grad);
    ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(chunks * kGradLanes));
    chunk_kernel<T><<<grid, cuda::kBlock, 0, stream>>>(static_cast<const T*>(a.grad), a.count, a.scale, chunks,
                                                       vector, partials, flags);
    return cuda::check_launch("grad_check_cuda (chunks)");
  }));
  // Levels of 2048 until one block is left; partials and `level` take turns as input.
  int64_t remaining = chunks;
  float* in = partials;
  uint32_t* in_flags = flags;
  float* out = level;
  uint32_t* out_flags = level_flags;
  while (remaining > kFoldWidth) {
    const int64_t blocks = num_folds(remaining);
    fold_kernel<<<static_cast<unsigned>(blocks), kFoldThreads, 0, stream>>>(in, in_flags, remaining, out, out_flags,
                                                                          nullptr);
    ZDP_RETURN_IF_ERROR(cuda::check_launch("grad_check_cuda (fold)"));
    std::swap(in, out);
    std::swap(in_flags, out_flags);
    remaining = blocks;
  }
  fold_kernel<<<1, kFoldThreads, 0, stream>>>(in, in_flags, remaining, nullptr, nullptr, a.out);
  return cuda::check_launch("grad_check_cuda (final fold)");
}

}  // namespace zdp::kernels
