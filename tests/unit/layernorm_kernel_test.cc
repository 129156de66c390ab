// The CPU twin of LayerNorm's two-pass dweight/dbias (kernels/layernorm.h): the chunk
// arithmetic both devices share, the sums against a float64 reference, and the scratch
// rules (the caller's partials and the twin's own give the same bits; the GPU's check
// refuses a missing one), and dbias's bits against the bias gradient's (one order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/bias_grad.h"
#include "kernels/elementwise.h"
#include "kernels/layernorm.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

TEST(LayerNormChunks, ChunkArithmetic) {
  EXPECT_EQ(layernorm_row_chunk(1), 128);
  EXPECT_EQ(layernorm_chunks(0), 1);
  EXPECT_EQ(layernorm_chunks(1), 1);
  EXPECT_EQ(layernorm_chunks(128), 1);
  EXPECT_EQ(layernorm_chunks(129), 2);
  EXPECT_EQ(layernorm_chunks(16384), 128);  // gpt2-124m: 16 x 1024 rows
  EXPECT_EQ(layernorm_partials_floats(128, 768), 0);
  EXPECT_EQ(layernorm_partials_floats(16384, 768), 2 * 128 * 768);
  // Past 65535 x 128 rows the chunk grows so that the chunks fit the GPU grid's y limit.
  const int64_t tall = int64_t{65535} * 128 + 1;
  EXPECT_EQ(layernorm_row_chunk(tall), 129);
  EXPECT_LE(layernorm_chunks(tall), kLayerNormMaxChunks);
  EXPECT_EQ(layernorm_chunks(int64_t{65535} * 128), 65535);
}

struct Case {
  int64_t rows, cols;
  std::vector<float> dy, x, w, mean, rstd;
};

Case make_case(int64_t rows, int64_t cols) {
  Case c{rows, cols, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 131 + cols));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows * cols; ++i) c.dy.push_back(u(rng)), c.x.push_back(2.0f * u(rng));
  for (int64_t i = 0; i < cols; ++i) c.w.push_back(u(rng));
  for (int64_t r = 0; r < rows; ++r) c.mean.push_back(0.1f * u(rng)), c.rstd.push_back(1.0f + 0.1f * u(rng));
  return c;
}

Status run(Case& c, std::vector<float>* dw, std::vector<float>* db, float* partials) {
  std::vector<float> dx(c.dy.size());
  dw->assign(static_cast<size_t>(c.cols), -1.0f);
  db->assign(static_cast<size_t>(c.cols), -1.0f);
  LayerNormBackwardArgs a{c.rows, c.cols, DType::kF32, c.dy.data(), c.x.data(), c.w.data(), c.mean.data(), c.rstd.data(),
                          dx.data(), OutputMode::kOverwrite, dw->data(), db->data(), partials};
  return layernorm_backward_cpu(a);
}

TEST(LayerNormChunks, ColumnSumsMatchAFloat64Reference) {
  for (const int64_t rows : {int64_t{1}, int64_t{127}, int64_t{128}, int64_t{129}, int64_t{1000}}) {
    const int64_t cols = 70;  // not a multiple of the CPU's 64-column blocks
    Case c = make_case(rows, cols);
    std::vector<float> dw, db;
    ASSERT_TRUE(run(c, &dw, &db, nullptr).ok());
    for (int64_t col = 0; col < cols; ++col) {
      double sw = 0, sb = 0, mag_w = 0, mag_b = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const size_t i = static_cast<size_t>(r * cols + col);
        const double xhat = (static_cast<float>(c.x[i] - c.mean[static_cast<size_t>(r)])) * c.rstd[static_cast<size_t>(r)];
        sw += c.dy[i] * xhat, sb += c.dy[i];
        mag_w += std::abs(c.dy[i] * xhat), mag_b += std::abs(c.dy[i]);
      }
      // Each term is rounded twice (xhat, the product), then summed over <= rows additions.
      const int n = static_cast<int>(rows) + 3;
      ASSERT_TRUE(testing::within(dw[static_cast<size_t>(col)], sw, testing::straight_line_bound(n, mag_w), col)) << rows;
      ASSERT_TRUE(testing::within(db[static_cast<size_t>(col)], sb, testing::straight_line_bound(n, mag_b), col)) << rows;
    }
  }
}

TEST(LayerNormChunks, CallersScratchGivesTheSameBits) {
  Case c = make_case(1000, 70);
  std::vector<float> dw1, db1, dw2, db2;
  std::vector<float> partials(static_cast<size_t>(layernorm_partials_floats(c.rows, c.cols)), 0.0f);
  ASSERT_TRUE(run(c, &dw1, &db1, nullptr).ok());
  ASSERT_TRUE(run(c, &dw2, &db2, partials.data()).ok());
  EXPECT_TRUE(testing::bitwise_equal(dw1, dw2, "dweight"));
  EXPECT_TRUE(testing::bitwise_equal(db1, db2, "dbias"));
  // The scratch holds the chunks' partials: the first chunk's dbias partial of column 0 is
  // the sum of its 128 rows in kernels/common.h's order: 8 lanes of rows l, l + 8, ...,
  // then the lanes in order.
  float lanes[kColumnSumLanes] = {};
  for (int64_t r = 0; r < 128; ++r) lanes[r % kColumnSumLanes] += c.dy[static_cast<size_t>(r * c.cols)];
  float first = lanes[0];
  for (int l = 1; l < kColumnSumLanes; ++l) first += lanes[l];
  EXPECT_EQ(partials[static_cast<size_t>(layernorm_chunks(c.rows) * c.cols)], first);
}

// dbias is a bias gradient: the same order as kernels/bias_grad.h, so the same bits, in
// one chunk and in several, fp32 and bf16.
TEST(LayerNormChunks, DbiasHasTheBiasGradientsBits) {
  for (const int64_t rows : {int64_t{100}, int64_t{1000}}) {
    Case c = make_case(rows, 70);
    std::vector<float> dw, db, bias(static_cast<size_t>(c.cols), -1.0f);
    ASSERT_TRUE(run(c, &dw, &db, nullptr).ok());
    ASSERT_TRUE(bias_grad_cpu({c.rows, c.cols, DType::kF32, c.dy.data(), bias.data()}).ok());
    EXPECT_TRUE(testing::bitwise_equal(db, bias, "fp32 dbias")) << rows << " rows";
    std::vector<Bf16> dy(c.dy.size()), x(c.x.size()), w(c.w.size()), dx(c.dy.size()), dw16(70), db16(70), bias16(70);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = from_f32<Bf16>(c.dy[i]), x[i] = from_f32<Bf16>(c.x[i]);
    for (size_t i = 0; i < w.size(); ++i) w[i] = from_f32<Bf16>(c.w[i]);
    ASSERT_TRUE(layernorm_backward_cpu({c.rows, c.cols, DType::kBF16, dy.data(), x.data(), w.data(), c.mean.data(),
                                        c.rstd.data(), dx.data(), OutputMode::kOverwrite, dw16.data(), db16.data()}).ok());
    ASSERT_TRUE(bias_grad_cpu({c.rows, c.cols, DType::kBF16, dy.data(), bias16.data()}).ok());
    EXPECT_TRUE(testing::bitwise_equal(db16, bias16, "bf16 dbias")) << rows << " rows";
  }
}

TEST(LayerNormChunks, GpuCheckRefusesAMissingScratch) {
  Case c = make_case(300, 8);
  std::vector<float> dx(c.dy.size()), dw(8), db(8);
  LayerNormBackwardArgs a{c.rows, c.cols, DType::kF32, c.dy.data(), c.x.data(), c.w.data(), c.mean.data(), c.rstd.data(),
                          dx.data(), OutputMode::kOverwrite, dw.data(), db.data()};
  const Status st = check_layernorm_backward_partials(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("partials"), std::string::npos) << st.message();
  EXPECT_TRUE(check_layernorm_backward(a).ok());  // the CPU twin brings its own
  a.rows = 128;
  EXPECT_TRUE(check_layernorm_backward_partials(a).ok());  // one chunk: no scratch needed
}

// The fused residual add: the same bits as add_cpu followed by a LayerNorm of its output,
// in place (sum over x, as the GPT's x_mid) and in bf16.
TEST(LayerNormResidual, EqualsAddThenLayerNorm) {
  const int64_t rows = 37, cols = 70;
  Case c = make_case(rows, cols);
  std::vector<Bf16> x(c.x.size()), r(c.dy.size()), w(c.w.size()), b(c.w.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = from_f32<Bf16>(c.x[i]), r[i] = from_f32<Bf16>(c.dy[i]);
  for (size_t i = 0; i < w.size(); ++i) w[i] = from_f32<Bf16>(c.w[i]), b[i] = from_f32<Bf16>(0.5f * c.w[i]);
  std::vector<Bf16> added(x.size()), y1(x.size()), y2(x.size());
  std::vector<float> m1(rows), s1(rows), m2(rows), s2(rows);
  ASSERT_TRUE(add_cpu({rows * cols, DType::kBF16, x.data(), r.data(), added.data()}).ok());
  ASSERT_TRUE(layernorm_forward_cpu({rows, cols, DType::kBF16, added.data(), w.data(), b.data(), y1.data(), m1.data(), s1.data()}).ok());
  std::vector<Bf16> inplace = x;
  ASSERT_TRUE(layernorm_forward_cpu({rows, cols, DType::kBF16, inplace.data(), w.data(), b.data(), y2.data(), m2.data(),
                                     s2.data(), 1e-5f, r.data(), inplace.data()}).ok());
  EXPECT_TRUE(testing::bitwise_equal(inplace, added, "sum"));
  EXPECT_TRUE(testing::bitwise_equal(y2, y1, "y"));
  EXPECT_TRUE(testing::bitwise_equal(m2, m1, "mean"));
  EXPECT_TRUE(testing::bitwise_equal(s2, s1, "rstd"));
  LayerNormArgs half{rows, cols, DType::kBF16, x.data(), w.data(), b.data(), y2.data(), m2.data(), s2.data(), 1e-5f, r.data()};
  EXPECT_EQ(layernorm_forward_cpu(half).code(), StatusCode::kInvalidArgument);  // a residual without a sum
}

// Where eps goes, and which variance: with the test inputs elsewhere (variance about 1)
// 1 / (sqrt(var) + eps) or the unbiased variance moves y by about 1e-5, inside every
// bound. Rows that are nearly constant (variance 3e-6, near eps = 1e-5) tell them apart:
// PyTorch's and GPT-2's 1 / sqrt(var + eps) with the biased variance is the reference;
// eps outside the root gives an rstd 1.8x this one, the unbiased variance at 4 columns
// one 4% smaller. Bound on rstd: the fp32 mean and subtraction err by at most 2u|x| an
// element, so the sum of squares by at most 4u max|x| / sigma relative (~1e-4 here with
// x = 0.5 +- 3e-3, sigma ~ 1.7e-3), plus its own cols x u; rstd takes half of that.
TEST(LayerNormForward, EpsIsInsideTheRootWithTheBiasedVariance) {
  for (const int64_t cols : {int64_t{4}, int64_t{96}}) {
    const int64_t rows = 16;
    std::mt19937_64 rng(static_cast<uint64_t>(cols));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<float> x(static_cast<size_t>(rows * cols)), w(static_cast<size_t>(cols), 1.0f), b(static_cast<size_t>(cols), 0.0f);
    for (float& v : x) v = static_cast<float>(0.5 + 3e-3 * u(rng));
    std::vector<float> y(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    ASSERT_TRUE(layernorm_forward_cpu({rows, cols, DType::kF32, x.data(), w.data(), b.data(), y.data(), mean.data(),
                                       rstd.data(), 1e-5f}).ok());
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      double m = 0, var = 0, lo = row[0], hi = row[0];
      for (int64_t c = 0; c < cols; ++c) m += row[c];
      m /= static_cast<double>(cols);
      for (int64_t c = 0; c < cols; ++c) var += (row[c] - m) * (row[c] - m), lo = std::min<double>(lo, row[c]), hi = std::max<double>(hi, row[c]);
      var /= static_cast<double>(cols);
      const double want = 1.0 / std::sqrt(var + 1e-5);
      const double sigma = std::sqrt(var);
      const double relative = 0.5 * testing::kSafety * testing::kUnitRoundoffF32 *
                              (4.0 * std::max(std::fabs(lo), std::fabs(hi)) / sigma + static_cast<double>(cols) + 4.0);
      EXPECT_TRUE(testing::within(rstd[static_cast<size_t>(r)], want, relative * want, r)) << "cols " << cols;
      EXPECT_GT(std::fabs(1.0 / (sigma + 1e-5) - want), 100 * relative * want) << "the rows must tell the forms apart";
    }
  }
}

}  // namespace
}  // namespace zdp::kernels
