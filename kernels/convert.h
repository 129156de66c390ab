// Scalar conversions between fp32 and the 16-bit float formats, shared by host and
// device code: bf16 and fp16 are stored as raw uint16_t so that host code needs no CUDA
// header. Rounding is round-to-nearest-even, as __float2bfloat16 / __float2half do.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZDP_HD __host__ __device__ __forceinline__
#else
#define ZDP_HD inline
#endif

namespace zdp::kernels {

ZDP_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

ZDP_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

ZDP_HD float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

ZDP_HD uint16_t f32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

ZDP_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return bits_float(sign);  // +-0
  // Subnormal half: value = man * 2^-24, exact in fp32.
  const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -mag : mag;
}

ZDP_HD uint16_t f32_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24 rounded to nearest even integer.
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: 0
    const uint32_t exp = abs >> 23;
    const uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 + (113 - exp - 1) ... keeps 24-bit mantissa aligned
    const uint32_t half_ulp = 1u << (shift - 1);
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    if (rem > half_ulp || (rem == half_ulp && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits to even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace zdp::kernels
