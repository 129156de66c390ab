// Counter-based random bits for stochastic rounding: Philox4x32-10 (Salmon et al., SC'11,
// "Parallel random numbers: as easy as 1, 2, 3"), the generator of cuRAND and PyTorch.
// A random value is a pure function of (seed, step, global element index), never of the
// rank, the thread or how a buffer was cut, so sharded and unsharded runs round alike
// (the engine's global index of an element is its place among all parameter elements, so
// bucket padding, which moves with K and the stage, does not move the bits either).
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

ZDP_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  hi = __umulhi(a, b);
  lo = a * b;
#else
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
#endif
}

// Philox4x32 with 10 rounds on counter `c` and key (k0, k1); checked against the
// Random123 known-answer vectors in tests/unit/rounding_test.cc.
ZDP_HD Philox4x32 philox4x32_10(Philox4x32 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, c.v[0], hi0, lo0);
    philox_mulhilo(kM1, c.v[2], hi1, lo1);
    c = Philox4x32{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// Elements share one Philox call in groups of 8 (4 x 32 bits = 8 x 16 bits): group g of
// step s is counter (g_lo, g_hi, s_lo, s_hi) under key (seed_lo, seed_hi). Distinct
// (step, group) pairs are distinct counters, so no two elements of any two steps share bits.
inline constexpr int kRandomGroup = 8;

ZDP_HD Philox4x32 random_group(uint64_t seed, uint64_t step, uint64_t group) {
  const Philox4x32 counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                            static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The 16 random bits of lane (index % 8) of a group's output.
ZDP_HD uint32_t random_lane16(const Philox4x32& r, int lane) {
  return (r.v[lane >> 1] >> ((lane & 1) * 16)) & 0xffffu;
}

// The 16 random bits of global element `index` at `step`.
ZDP_HD uint32_t random16(uint64_t seed, uint64_t step, uint64_t index) {
  return random_lane16(random_group(seed, step, index / kRandomGroup), static_cast<int>(index % kRandomGroup));
}

// fp32 -> bf16 with stochastic rounding: adding 16 uniform random bits below the kept
// 16 bits and truncating rounds up with probability (dropped bits) / 2^16, so the result
// is unbiased. Values in bf16 stay exact; NaN stays NaN; past the largest bf16 the
// carry reaches infinity exactly as it would in the exponent field.
ZDP_HD uint16_t f32_to_bf16_stochastic(float f, uint32_t random_bits16) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f32_to_bf16(f);  // inf and NaN as usual
  return static_cast<uint16_t>((u + random_bits16) >> 16);
}

// fp32 -> fp16 with stochastic rounding: between the fp16 neighbours of |f| it rounds
// away from zero with probability (|f| - lower) / (upper - lower). Normal results drop 13
// mantissa bits, and adding the top 13 of the random bits before truncating carries with
// exactly that probability (unbiased; the carry may reach the exponent, up to infinity
// just below 65536, as in f32_to_bf16_stochastic). Subnormal results (|f| < 2^-14) compare
// the 16 random bits with the fraction of a 2^-24 step: unbiased to 2^-16 of a step.
// Exact fp16 values stay exact; |f| >= 65536, infinities and NaN round as to nearest.
ZDP_HD uint16_t f32_to_f16_stochastic(float f, uint32_t random_bits16) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x47800000u) return f32_to_f16_branchless(f);  // beyond fp16 (inf), inf and NaN
  if (a >= 0x38800000u) return static_cast<uint16_t>(sign | ((a - 0x38000000u + (random_bits16 >> 3)) >> 13));
  const float steps = bits_float(a) * 16777216.0f;  // |f| / 2^-24, exact (< 1024)
  const uint32_t whole = static_cast<uint32_t>(steps);
  const float fraction = steps - static_cast<float>(whole);  // exact
  const uint32_t up = static_cast<float>(random_bits16) < fraction * 65536.0f ? 1u : 0u;
  return static_cast<uint16_t>(sign | (whole + up));
}

// Rounds an updated fp32 value into output type P; `random_bits16` is used only by
// stochastic rounding, which bf16 and fp16 outputs support (the launchers check).
template <typename P>
ZDP_HD P round_param(float p, uint32_t random_bits16, Rounding rounding) {
  return from_f32<P>(p);
}
template <>
ZDP_HD Bf16 round_param<Bf16>(float p, uint32_t random_bits16, Rounding rounding) {
  return Bf16{rounding == Rounding::kStochastic ? f32_to_bf16_stochastic(p, random_bits16) : f32_to_bf16(p)};
}
template <>
ZDP_HD Half round_param<Half>(float p, uint32_t random_bits16, Rounding rounding) {
  return Half{rounding == Rounding::kStochastic ? f32_to_f16_stochastic(p, random_bits16) : f32_to_f16_branchless(p)};
}

}  // namespace zdp::kernels
