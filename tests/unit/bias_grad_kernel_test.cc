// kernels/bias_grad.h on the CPU: the column sums against float64 within the fp32 bound of
// their length, the documented order exactly (chunks of 128 rows, 8 lanes, lane and chunk
// order), the chunk rule, and argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/bias_grad.h"
#include "testing/test_random.h"

namespace zdp::kernels {
namespace {

using zdp::testing::TestRandom;

TEST(BiasGradKernel, ColumnSumsWithinTheFp32BoundOfFloat64) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {128, 8}, {129, 300}, {1000, 257}}) {
    const std::vector<float> dy = rnd.signed_vector(static_cast<size_t>(rows * cols), 1e-3f, 2.0f);
    std::vector<float> db(static_cast<size_t>(cols), -1234.5f);
    ASSERT_TRUE(bias_grad_cpu({rows, cols, DType::kF32, dy.data(), db.data(), nullptr}).ok());
    for (int64_t c = 0; c < cols; ++c) {
      double sum = 0, abs_sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += dy[static_cast<size_t>(r * cols + c)], abs_sum += std::fabs(dy[static_cast<size_t>(r * cols + c)]);
      // Any order of fp32 additions: |error| <= (n - 1) u sum|x| (u = 2^-24), plus the rounding.
      const double bound = static_cast<double>(rows) * 0x1p-24 * abs_sum + 0x1p-24 * std::fabs(sum);
      EXPECT_NEAR(db[static_cast<size_t>(c)], sum, bound) << rows << " x " << cols << ", column " << c;
    }
  }
}

// The order the GPU uses too, spelled out: values that cancel only in that order.
TEST(BiasGradKernel, SumsInTheDocumentedOrder) {
  const int64_t rows = 300, cols = 2;  // chunks of 128, 128 and 44 rows
  std::vector<float> dy(static_cast<size_t>(rows * cols));
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (float& v : dy) v = std::ldexp(rnd.signed_uniform(1.0f, 2.0f), static_cast<int>(rnd.integer(-20, 20)));
  std::vector<float> db(static_cast<size_t>(cols));
  ASSERT_TRUE(bias_grad_cpu({rows, cols, DType::kF32, dy.data(), db.data(), nullptr}).ok());
  ASSERT_EQ(bias_grad_row_chunk(rows), 128);
  ASSERT_EQ(bias_grad_chunks(rows), 3);
  for (int64_t c = 0; c < cols; ++c) {
    float total = 0;
    for (int64_t k = 0; k < 3; ++k) {
      float lanes[kBiasGradLanes] = {};
      for (int64_t r = k * 128; r < std::min<int64_t>(rows, (k + 1) * 128); ++r) lanes[(r - k * 128) % 8] += dy[static_cast<size_t>(r * cols + c)];
      float chunk = lanes[0];
      for (int l = 1; l < kBiasGradLanes; ++l) chunk += lanes[l];
      total = k == 0 ? chunk : total + chunk;
    }
    EXPECT_EQ(db[static_cast<size_t>(c)], total) << "column " << c;
  }
}

TEST(BiasGradKernel, Bf16RoundsTheFp32SumOnce) {
  std::vector<Bf16> dy;
  for (int r = 0; r < 4; ++r) dy.push_back(from_f32<Bf16>(1.0f)), dy.push_back(from_f32<Bf16>(0x1p-9f));
  std::vector<Bf16> db(2);
  ASSERT_TRUE(bias_grad_cpu({4, 2, DType::kBF16, dy.data(), db.data(), nullptr}).ok());
  EXPECT_EQ(to_f32(db[0]), 4.0f);
  EXPECT_EQ(to_f32(db[1]), 0x1p-7f);  // four 2^-9 exact in fp32, one rounding
}

TEST(BiasGradKernel, ChunksGrowPastTheGridLimitAndArgumentsAreChecked) {
  EXPECT_EQ(bias_grad_chunks(0), 1);
  EXPECT_EQ(bias_grad_chunks(128), 1);
  EXPECT_EQ(bias_grad_chunks(129), 2);
  EXPECT_EQ(bias_grad_partials_floats(128, 10), 0);
  EXPECT_EQ(bias_grad_partials_floats(16384, 768), 128 * 768);
  const int64_t huge = 65535 * 128 + 1;
  EXPECT_GT(bias_grad_row_chunk(huge), 128);
  EXPECT_LE(bias_grad_chunks(huge), kBiasGradMaxChunks);
  std::vector<float> db(3, 7.0f);
  ASSERT_TRUE(bias_grad_cpu({0, 3, DType::kF32, nullptr, db.data(), nullptr}).ok());
  EXPECT_EQ(db, std::vector<float>(3, 0.0f));  // no rows: zero
  EXPECT_EQ(bias_grad_cpu({-1, 3, DType::kF32, nullptr, db.data(), nullptr}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bias_grad_cpu({2, 3, DType::kF32, nullptr, db.data(), nullptr}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bias_grad_cpu({2, 3, DType::kF32, db.data(), nullptr, nullptr}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
