// Helpers of the model-layer kernels (layernorm, softmax, cross-entropy, embedding):
// warp and block sums, and grids of one warp per row or one thread per element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

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

// n = 8 elements through one 16-byte load (two for fp32; p 16-byte aligned), or n = 1
// through a plain load, into fp32. Cached loads: a row is read again within the kernel.
template <int N>
__device__ __forceinline__ void load_n(const float* p, float (&x)[8]) {
  if constexpr (N == 8) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
    x[0] = *p;
  }
}
template <int N, typename T>  // Bf16 or Half
__device__ __forceinline__ void load_n(const T* p, float (&x)[8]) {
  if constexpr (N == 8) {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = to_f32(T{static_cast<uint16_t>(w[i] & 0xffffu)});
      x[2 * i + 1] = to_f32(T{static_cast<uint16_t>(w[i] >> 16)});
    }
  } else {
    x[0] = to_f32(*p);
  }
}
// lo and hi rounded to bf16 (to nearest, ties to even) and packed, lo in the low half:
// one cvt.rn.bf16x2.f32 on sm_80 and later, where f32_to_bf16 (kernels/convert.h) takes
// about ten integer instructions an element. The same bits as f32_to_bf16 for every
// non-NaN input (subnormals and overflow to infinity included); a NaN stays a NaN, the
// canonical 0x7fff rather than the input's sign and payload (tests/gpu/convert_gpu_test.cu).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));  // the first source goes high
  return packed;
#else
  return static_cast<uint32_t>(f32_to_bf16(lo)) | (static_cast<uint32_t>(f32_to_bf16(hi)) << 16);
#endif
}

// The first N of x, rounded to T, to p (16 bytes at once for N = 8).
template <int N, typename T>
__device__ __forceinline__ void store_n(T* p, const float (&x)[8]) {
  if constexpr (N == 8 && std::is_same_v<T, Bf16>) {
    *reinterpret_cast<uint4*>(p) =
        make_uint4(pack_bf16x2(x[0], x[1]), pack_bf16x2(x[2], x[3]), pack_bf16x2(x[4], x[5]), pack_bf16x2(x[6], x[7]));
  } else if constexpr (N == 8) {
    T o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = from_f32<T>(x[i]);
    if constexpr (sizeof(T) == 4) {
      reinterpret_cast<float4*>(p)[0] = make_float4(o[0], o[1], o[2], o[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(o[4], o[5], o[6], o[7]);
    } else {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = static_cast<uint32_t>(o[2 * i].bits) | (static_cast<uint32_t>(o[2 * i + 1].bits) << 16);
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
    *p = from_f32<T>(x[0]);
  }
}

// e^x through the special-function unit: x log2(e), then ex2.approx.ftz.f32 (one FMUL and
// one MUFU.EX2), where exp_branchless (kernels/gemm.h) takes about 25 instructions under
// --fmad=false: in the cross-entropy's exponential pass, most of the kernel's instructions.
// The error, bounded piece by piece rather than by the Guide's (2 + floor(1.173 |x|)) for
// __expf, which leaves a correctly rounded ex2 little room (found by a review, simulated):
// ex2.approx is within 2 ulp of the correctly rounded 2^p (PTX ISA), so 2.5 of the exact
// one; the product p = x log2(e) is rounded (|x| log2(e) 2^-24 of exponent, |x| 2^-24 of
// the result) and the fp32 log2(e) is 0.224 2^-24 of itself low (0.224 |x| 2^-24 more),
// and a relative error r is at most r 2^24 ulp: within (2.5 + 1.25 |x|) ulp of e^x.
// Results below 2^-126 flush to 0 (ftz: a softmax term that small is below 2^-126 of a
// sum of at least 1). -inf gives 0, NaN stays NaN. The CPU twins keep exp_branchless;
// tests/gpu/sfu_exp_gpu_test.cu checks both bounds against float64.
__device__ __forceinline__ float exp_sfu(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
#else
  // The SIMT emulation's host build (testing/simt/): the same product, then the exact 2^p
  // (within ex2.approx's 2 ulp of it) and the same flush of results below 2^-126.
  const float y = exp2f(x * 1.44269504088896341f);
  return y < 0x1p-126f ? 0.0f : y;
#endif
}

// Blocks of kBlock threads for one warp per row.
inline unsigned warp_rows_grid(int64_t rows) {
  return static_cast<unsigned>((rows + kBlock / 32 - 1) / (kBlock / 32));
}
// Blocks of kBlock threads for one thread per item.
inline unsigned blocks_for(int64_t items) { return static_cast<unsigned>((items + kBlock - 1) / kBlock); }

}  // namespace zdp::kernels::cuda
