// Philox4x32-10 against the Random123 known-answer vectors; stochastic rounding to bf16
// (neighbours only, exact values kept, unbiased); and the branch-free fp16 conversions of
// kernels/common.h against those of kernels/convert.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/common.h"
#include "kernels/philox.h"
#include "testing/test_random.h"

namespace zdp::kernels {
namespace {

// From Random123's kat_vectors: counter (4 words), key (2 words) -> output (4 words).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    Philox4x32 ctr;
    uint32_t k0, k1;
    Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 got = philox4x32_10(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], k.want.v[i]) << "word " << i;
  }
}

TEST(Philox, RandomBitsAreKeyedBySeedStepAndIndexOnly) {
  EXPECT_EQ(random16(7, 3, 1000), random16(7, 3, 1000));
  int same_seed = 0, same_step = 0, same_index = 0;
  for (uint64_t i = 0; i < 4096; ++i) {
    same_seed += random16(7, 3, i) == random16(8, 3, i);
    same_step += random16(7, 3, i) == random16(7, 4, i);
    same_index += random16(7, 3, i) == random16(7, 3, i + 1);
  }
  // 16-bit values agree by chance 1 in 65536 times.
  EXPECT_LE(same_seed, 2);
  EXPECT_LE(same_step, 2);
  EXPECT_LE(same_index, 2);
  // Indices past 2^32 use the counter's high word.
  EXPECT_NE(random_group(1, 1, 5).v[0], random_group(1, 1, 5 + (uint64_t{1} << 32)).v[0]);
}

TEST(StochasticRounding, KeepsExactValuesAndPicksANeighbour) {
  zdp::testing::TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (int i = 0; i < 100000; ++i) {
    const float x = rnd.signed_uniform(1e-30f, 1e30f);
    const uint32_t r = static_cast<uint32_t>(rnd.integer(0, 0xffff));
    const uint16_t lo = static_cast<uint16_t>(float_bits(x) >> 16);  // truncation toward zero
    const uint16_t got = f32_to_bf16_stochastic(x, r);
    ASSERT_TRUE(got == lo || got == lo + 1) << x;
    const float exact = bf16_to_f32(lo);
    ASSERT_EQ(f32_to_bf16_stochastic(exact, r), lo) << "exact bf16 value " << exact << " moved";
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_bf16_stochastic(inf, 0xffff), 0x7f80);
  EXPECT_EQ(f32_to_bf16_stochastic(-inf, 0xffff), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16_stochastic(std::nanf(""), 0xffff))));
  // Past the largest finite bf16 the carry reaches infinity.
  EXPECT_EQ(f32_to_bf16_stochastic(std::numeric_limits<float>::max(), 0xffff), 0x7f80);
}

// E[round(x)] = x: over many indices, the fraction rounded up equals the dropped fraction.
TEST(StochasticRounding, IsUnbiased) {
  zdp::testing::TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const uint64_t seed = rnd.bits64();
  for (uint32_t dropped : {0x0001u, 0x4000u, 0x8000u, 0xc000u, 0xfff0u}) {
    const float x = bits_float(0x3f810000u | dropped);  // between two bf16 values near 1
    const int n = 1 << 18;
    int up = 0;
    for (int i = 0; i < n; ++i) up += f32_to_bf16_stochastic(x, random16(seed, 1, static_cast<uint64_t>(i))) == 0x3f82;
    const double p = dropped / 65536.0;
    const double sigma = std::sqrt(n * p * (1 - p)) + 1;
    EXPECT_NEAR(up, n * p, 6 * sigma) << "dropped bits 0x" << std::hex << dropped;
  }
}

// fp16: the two neighbours of |x| by round-toward-zero (f32_to_f16 rounds to nearest;
// stepping back one encoding when it rounded up), for the tests below.
uint16_t f16_toward_zero(float x) {
  uint16_t h = f32_to_f16(x);
  if (std::fabs(f16_to_f32(h)) > std::fabs(x)) --h;
  return h;
}

TEST(StochasticRoundingFp16, KeepsExactValuesAndPicksANeighbour) {
  zdp::testing::TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (int i = 0; i < 100000; ++i) {
    // Subnormal, normal and up to the largest finite fp16 (65504).
    const float x = rnd.signed_uniform(1e-9f, 65000.0f);
    const uint32_t r = static_cast<uint32_t>(rnd.integer(0, 0xffff));
    const uint16_t lo = f16_toward_zero(x);
    const uint16_t got = f32_to_f16_stochastic(x, r);
    ASSERT_TRUE(got == lo || got == lo + 1) << x << " -> 0x" << std::hex << got << ", lower neighbour 0x" << lo;
    const float exact = f16_to_f32(lo);
    ASSERT_EQ(f32_to_f16_stochastic(exact, r), lo) << "exact fp16 value " << exact << " moved";
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16_stochastic(inf, 0xffff), 0x7c00);
  EXPECT_EQ(f32_to_f16_stochastic(-inf, 0), 0xfc00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16_stochastic(std::nanf(""), 0xffff))));
  EXPECT_EQ(f32_to_f16_stochastic(1e6f, 0), 0x7c00);  // beyond fp16: infinity, as to nearest
  // 65520 is half way from 65504 (the largest fp16) to 65536: the carry reaches infinity.
  EXPECT_EQ(f32_to_f16_stochastic(65520.0f, 0xffff), 0x7c00);
  EXPECT_EQ(f32_to_f16_stochastic(65520.0f, 0), 0x7bff);
  EXPECT_EQ(f32_to_f16_stochastic(-0.0f, 0xffff), 0x8000);
}

// Every one of the 2^16 random values once: the mean of the results is x itself for a
// normal result (13 dropped bits, exactly unbiased), and within 2^-16 of a 2^-24 step for a
// subnormal one.
TEST(StochasticRoundingFp16, IsUnbiasedOverEveryRandomValue) {
  zdp::testing::TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (int i = 0; i < 200; ++i) {
    const bool subnormal = i % 2 == 1;
    const float x = subnormal ? rnd.signed_uniform(1e-9f, 6e-5f) : rnd.signed_uniform(1e-4f, 6e4f);
    double sum = 0;
    for (uint32_t r = 0; r <= 0xffff; ++r) sum += f16_to_f32(f32_to_f16_stochastic(x, r));
    const double mean = sum / 65536.0;
    const double tolerance = subnormal ? std::ldexp(1.0, -24 - 16) : 0.0;
    EXPECT_LE(std::fabs(mean - x), tolerance) << "x = " << x << ", mean " << mean;
  }
}

TEST(BranchlessHalf, DecodeMatchesConvertHForEveryEncoding) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    ASSERT_EQ(float_bits(f16_to_f32_branchless(static_cast<uint16_t>(h))),
              float_bits(f16_to_f32(static_cast<uint16_t>(h))))
        << "half 0x" << std::hex << h;
  }
}

// Every sign/exponent with a stride through the mantissa, plus every pattern of the 13
// dropped bits (which decide the rounding) under a few random kept bits: ~45M inputs.
// (All 2^32 inputs agree too; that sweep takes ~10 s, too long for a unit test.)
TEST(BranchlessHalf, EncodeMatchesConvertH) {
  zdp::testing::TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 251) {
    const float x = bits_float(static_cast<uint32_t>(u));
    ASSERT_EQ(f32_to_f16_branchless(x), f32_to_f16(x)) << "bits 0x" << std::hex << u;
  }
  for (uint32_t sign_exp = 0; sign_exp < 512; ++sign_exp) {
    for (int r = 0; r < 3; ++r) {
      const uint32_t kept = static_cast<uint32_t>(rnd.integer(0, 1023)) << 13;
      for (uint32_t low = 0; low < (1u << 13); ++low) {
        const float x = bits_float((sign_exp << 23) | kept | low);
        ASSERT_EQ(f32_to_f16_branchless(x), f32_to_f16(x)) << x;
      }
    }
  }
}

}  // namespace
}  // namespace zdp::kernels
