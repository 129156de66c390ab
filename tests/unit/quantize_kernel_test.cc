// kernels/quantize.h on the CPU: the block format, the error bound, NaN propagation, the
// dequantized sum, and what error feedback does over many steps (the bias it removes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quantize.h"

namespace zdp::kernels {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> roundtrip(const std::vector<float>& in, int bits, std::vector<float>* error = nullptr) {
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<char> wire(static_cast<size_t>(quant_chunk_bytes(n, bits)));
  EXPECT_TRUE(quantize_cpu(QuantizeArgs{in.data(), DType::kF32, error ? error->data() : nullptr, n, bits, wire.data()}).ok());
  std::vector<float> out(in.size());
  EXPECT_TRUE(dequantize_cpu(DequantizeArgs{wire.data(), 0, 1, n, bits, out.data(), DType::kF32}).ok());
  return out;
}

TEST(QuantizeKernel, ChunkBytesCountScalesAndCodesPaddedTo16) {
  EXPECT_EQ(quant_chunk_bytes(0, 8), 0);
  EXPECT_EQ(quant_chunk_bytes(256, 8), 4 + 256 + 12);   // 260 -> 272
  EXPECT_EQ(quant_chunk_bytes(257, 8), 8 + 257 + 7);    // 265 -> 272
  EXPECT_EQ(quant_chunk_bytes(256, 4), 4 + 128 + 12);   // 132 -> 144
  EXPECT_EQ(quant_chunk_bytes(32, 4), 32);              // 4 + 16 = 20 -> 32
  // About 4x (int8) and 8x (int4) fewer bytes than fp32 for a large chunk.
  EXPECT_NEAR(4.0 * 1048576 / quant_chunk_bytes(1048576, 8), 3.94, 0.01);
  EXPECT_NEAR(4.0 * 1048576 / quant_chunk_bytes(1048576, 4), 7.76, 0.01);
}

// Every element is within half a step of its block's scale, for odd sizes and both widths.
TEST(QuantizeKernel, ErrorIsAtMostHalfAStepOfItsBlock) {
  for (int bits : {8, 4}) {
    for (int64_t n : {1, 31, 256, 257, 1000, 70000}) {
      const std::vector<float> in = random_values(n, static_cast<uint32_t>(n + bits));
      const std::vector<float> out = roundtrip(in, bits);
      for (int64_t b = 0; b * kQuantBlock < n; ++b) {
        float amax = 0;
        const int64_t end = std::min(n, (b + 1) * kQuantBlock);
        for (int64_t k = b * kQuantBlock; k < end; ++k) amax = std::max(amax, std::fabs(in[static_cast<size_t>(k)]));
        const float step = amax / static_cast<float>(quant_max(bits));
        for (int64_t k = b * kQuantBlock; k < end; ++k) {
          ASSERT_LE(std::fabs(out[static_cast<size_t>(k)] - in[static_cast<size_t>(k)]), 0.5f * step * 1.0001f)
              << "bits " << bits << " n " << n << ": mismatch at index " << k;
        }
      }
    }
  }
}

TEST(QuantizeKernel, BlockMaximumIsExactAndZerosStayZero) {
  std::vector<float> in(300, 0.0f);
  in[3] = -2.5f;
  in[7] = 1.0f;
  const std::vector<float> out = roundtrip(in, 8);
  EXPECT_EQ(out[3], -2.5f);  // the block's largest magnitude is code +-127: exact
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[299], 0.0f);  // an all-zero block has scale 0
}

TEST(QuantizeKernel, NonFiniteValuesPoisonTheirBlockAndNotTheErrorFeedback) {
  std::vector<float> in = random_values(512, 3);
  in[10] = std::numeric_limits<float>::quiet_NaN();
  in[300] = std::numeric_limits<float>::infinity();
  std::vector<float> error(512, 0.0f);
  const std::vector<float> out = roundtrip(in, 8, &error);
  for (int k = 0; k < 512; ++k) {
    ASSERT_FALSE(std::isfinite(out[static_cast<size_t>(k)])) << "index " << k << ": the step must be skipped";
    ASSERT_EQ(error[static_cast<size_t>(k)], 0.0f) << "index " << k;
  }
}

TEST(QuantizeKernel, ErrorFeedbackKeepsExactlyWhatTheCodesLost) {
  const std::vector<float> in = random_values(1000, 5);
  std::vector<float> error = random_values(1000, 6, 0.01f);
  const std::vector<float> before = error;
  const std::vector<float> out = roundtrip(in, 4, &error);
  for (size_t k = 0; k < in.size(); ++k) {
    ASSERT_EQ(error[k], (in[k] + before[k]) - out[k]) << "mismatch at index " << k;
  }
}

TEST(QuantizeKernel, InputInBf16AndOutputInBf16) {
  std::vector<Bf16> in(100);
  for (int k = 0; k < 100; ++k) in[static_cast<size_t>(k)] = from_f32<Bf16>(static_cast<float>(k - 50) / 8.0f);
  std::vector<char> wire(static_cast<size_t>(quant_chunk_bytes(100, 8)));
  ASSERT_TRUE(quantize_cpu(QuantizeArgs{in.data(), DType::kBF16, nullptr, 100, 8, wire.data()}).ok());
  std::vector<Bf16> out(100);
  ASSERT_TRUE(dequantize_cpu(DequantizeArgs{wire.data(), 0, 1, 100, 8, out.data(), DType::kBF16}).ok());
  // Multiples of 1/8 up to 50/8: the scale is 50/8/127, every value within half a step.
  for (int k = 0; k < 100; ++k) {
    ASSERT_NEAR(to_f32(out[static_cast<size_t>(k)]), (k - 50) / 8.0f, 0.5 * 50 / 8.0 / 127 + 0.02) << "index " << k;
  }
}

// The receiver's sum: its own slice exactly, every other chunk dequantized, in rank order.
TEST(QuantizeKernel, DequantSumAddsOwnSliceAndPeerChunks) {
  const int K = 4, bits = 8;
  const int64_t n = 700, chunk = quant_chunk_bytes(n, bits);
  std::vector<std::vector<float>> grads;
  std::vector<char> wire(static_cast<size_t>(K * chunk));
  for (int q = 0; q < K; ++q) {
    grads.push_back(random_values(n, static_cast<uint32_t>(10 + q)));
    ASSERT_TRUE(quantize_cpu(QuantizeArgs{grads.back().data(), DType::kF32, nullptr, n, bits, wire.data() + q * chunk}).ok());
  }
  const int self = 2;
  std::vector<float> out = grads[self];  // aliasing own and out, as stage 1 does
  ASSERT_TRUE(dequant_sum_cpu(DequantSumArgs{wire.data(), chunk, K, self, out.data(), out.data(), false, n, bits}).ok());
  for (int64_t k = 0; k < n; ++k) {
    float want = grads[self][static_cast<size_t>(k)];
    for (int q = 0; q < K; ++q) {
      if (q == self) continue;
      std::vector<float> deq(static_cast<size_t>(n));
      ASSERT_TRUE(dequantize_cpu(DequantizeArgs{wire.data() + q * chunk, 0, 1, n, bits, deq.data(), DType::kF32}).ok());
      want = want + deq[static_cast<size_t>(k)];
    }
    ASSERT_EQ(out[static_cast<size_t>(k)], want) << "mismatch at index " << k;
    if (k > 20) break;  // the dequantization above is O(n) per element: a prefix suffices
  }
  EXPECT_FALSE(dequant_sum_cpu(DequantSumArgs{wire.data(), chunk, K, self, out.data(), out.data(), true, n, bits}).ok());
}

// The reason for error feedback: a gradient that repeats (a steady drift in a parameter)
// loses the same rounding every step without it, so the bias grows linearly with the
// steps; with it, the total sent trails the total gradient by one step's residual at most.
TEST(QuantizeKernel, ErrorFeedbackBoundsTheAccumulatedErrorWhileWithoutItTheBiasGrows) {
  const int64_t n = 2048;
  const int steps = 200;
  for (int bits : {8, 4}) {
    const std::vector<float> g = random_values(n, 42);
    std::vector<float> error(static_cast<size_t>(n), 0.0f);
    std::vector<double> sent_ef(static_cast<size_t>(n), 0.0), sent_plain(static_cast<size_t>(n), 0.0);
    for (int s = 0; s < steps; ++s) {
      const std::vector<float> with = roundtrip(g, bits, &error);
      const std::vector<float> without = roundtrip(g, bits);
      for (int64_t k = 0; k < n; ++k) {
        sent_ef[static_cast<size_t>(k)] += with[static_cast<size_t>(k)];
        sent_plain[static_cast<size_t>(k)] += without[static_cast<size_t>(k)];
      }
    }
    double bias_ef = 0, bias_plain = 0, amax = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double total = static_cast<double>(g[static_cast<size_t>(k)]) * steps;
      bias_ef = std::max(bias_ef, std::fabs(sent_ef[static_cast<size_t>(k)] - total));
      bias_plain = std::max(bias_plain, std::fabs(sent_plain[static_cast<size_t>(k)] - total));
      amax = std::max(amax, std::fabs(static_cast<double>(g[static_cast<size_t>(k)])));
    }
    const double half_step = 0.5 * amax / quant_max(bits);
    // With feedback: the residual of the last step, plus fp32 rounding of the sums.
    EXPECT_LE(bias_ef, 2 * half_step) << "bits " << bits;
    // Without: the per-step rounding, steps times over (a quarter step on average at the worst element).
    EXPECT_GE(bias_plain, 0.25 * half_step * steps) << "bits " << bits;
    EXPECT_GT(bias_plain, 20 * bias_ef) << "bits " << bits;
  }
}

TEST(QuantizeKernel, RefusesBadArguments) {
  float x = 1;
  char wire[32];
  EXPECT_FALSE(quantize_cpu(QuantizeArgs{&x, DType::kF32, nullptr, 1, 5, wire}).ok());
  EXPECT_FALSE(quantize_cpu(QuantizeArgs{&x, DType::kI64, nullptr, 1, 8, wire}).ok());
  EXPECT_FALSE(quantize_cpu(QuantizeArgs{nullptr, DType::kF32, nullptr, 1, 8, wire}).ok());
  EXPECT_FALSE(dequant_sum_cpu(DequantSumArgs{wire, 4, 2, -1, nullptr, &x, false, 1, 8}).ok());  // stride too small
  // Large enough but not a multiple of 16: a GPU would read the next chunk's scales misaligned.
  char wide[64] = {};
  ASSERT_EQ(quant_chunk_bytes(1, 8), 16);
  EXPECT_TRUE(dequant_sum_cpu(DequantSumArgs{wide, 32, 2, -1, nullptr, &x, false, 1, 8}).ok());
  const Status odd = dequant_sum_cpu(DequantSumArgs{wide, 20, 2, -1, nullptr, &x, false, 1, 8});
  EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("not a multiple of 16"), std::string::npos) << odd.to_string();
}

}  // namespace
}  // namespace zdp::kernels
