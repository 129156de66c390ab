// The gradient check's CPU path: sum of squares against float64 under the tolerance rule,
// the documented summation order reproduced bit for bit by an independent scalar loop
// (what the GPU must match too), the same bits for any thread count, and the non-finite flag.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/grad_check.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::TestRandom;

template <typename T>
GradStats check(const std::vector<T>& x, float scale) {
  GradStats out{-1.0f, -1.0f};
  GradCheckArgs a;
  a.grad = x.data();
  a.dtype = zdp::testing::dtype_of<T>();
  a.count = static_cast<int64_t>(x.size());
  a.scale = scale;
  a.out = &out;
  const Status st = grad_check_cpu(a);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

// The order of kernels/grad_check.h written out naively, element by element.
template <typename T>
float sum_in_documented_order(const std::vector<T>& x, float scale) {
  constexpr int kV = kGradVecWidth<T>;
  constexpr int kW = kGradLanes * kV;
  std::vector<float> partials;
  for (size_t base = 0; base < x.size(); base += kGradChunk) {
    float acc[kW] = {};
    for (size_t i = base; i < std::min(x.size(), base + kGradChunk); ++i) {
      const float y = to_f32(x[i]) * scale;
      acc[(i - base) % kW] += y * y;
    }
    float lane[kGradLanes];
    for (int l = 0; l < kGradLanes; ++l) {
      for (int s = kV / 2; s >= 1; s /= 2) {
        for (int i = 0; i < s; ++i) acc[l * kV + i] += acc[l * kV + i + s];
      }
      lane[l] = acc[l * kV];
    }
    for (int s = kGradLanes / 2; s >= 1; s /= 2) {
      for (int l = 0; l < s; ++l) lane[l] += lane[l + s];
    }
    partials.push_back(lane[0]);
  }
  while (partials.size() > 1) {
    std::vector<float> next;
    for (size_t i = 0; i < partials.size(); i += 2) {
      next.push_back(i + 1 < partials.size() ? partials[i] + partials[i + 1] : partials[i]);
    }
    partials.swap(next);
  }
  return partials.empty() ? 0.0f : partials[0];
}

template <typename T>
class GradCheckDtypes : public ::testing::Test {};
using Dtypes = ::testing::Types<float, Bf16, Half>;
TYPED_TEST_SUITE(GradCheckDtypes, Dtypes);

TYPED_TEST(GradCheckDtypes, SumOfSquaresMatchesFloat64AndTheDocumentedOrder) {
  using T = TypeParam;
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const float scale = rnd.uniform(0.3f, 2.0f);
  for (int64_t n : {1, 7, 255, 4095, 4096, 4097, 100003, (1 << 20) + 5}) {
    const std::vector<T> x = zdp::testing::encode<T>(rnd.signed_vector(static_cast<size_t>(n), 1e-3f, 4.0f));
    double ref = 0;
    for (const T& v : x) ref += (double{to_f32(v)} * scale) * (double{to_f32(v)} * scale);
    const GradStats got = check(x, scale);
    // Roundings on the longest chain: scale, square, the rows of a chunk (4096 / W), the V
    // and lane folds (log2 V + 5), the chunk tree (log2 chunks, rounded up). All terms are
    // positive, so the magnitude is the sum itself.
    const int64_t chunks = (n + kGradChunk - 1) / kGradChunk;
    const int roundings = 2 + static_cast<int>(kGradChunk / (kGradLanes * kGradVecWidth<T>)) +
                          static_cast<int>(std::log2(kGradVecWidth<T>)) + 5 +
                          static_cast<int>(std::ceil(std::log2(static_cast<double>(chunks)))) + 1;
    EXPECT_TRUE(zdp::testing::within(got.sum_sq, ref, zdp::testing::straight_line_bound(roundings, ref))) << "n=" << n;
    EXPECT_EQ(float_bits(got.sum_sq), float_bits(sum_in_documented_order(x, scale))) << "n=" << n;
    EXPECT_EQ(got.nonfinite, 0.0f);
  }
}

TYPED_TEST(GradCheckDtypes, SameBitsForAnyThreadCount) {
  // Under scripts/sanitize.sh tsan, OMP_THREAD_LIMIT=1 caps every team at one thread
  // (libgomp is not instrumented, so its teams only give false reports): nothing to compare.
  if (omp_get_thread_limit() < 2) GTEST_SKIP() << "OMP_THREAD_LIMIT is " << omp_get_thread_limit() << ": no team of 2+ threads";
  using T = TypeParam;
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const std::vector<T> x = zdp::testing::encode<T>(rnd.signed_vector(300007, 1e-3f, 4.0f));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const GradStats one = check(x, 1.0f);
  for (int threads : {2, 3, 8}) {
    omp_set_num_threads(threads);
    const GradStats got = check(x, 1.0f);
    EXPECT_EQ(float_bits(got.sum_sq), float_bits(one.sum_sq)) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TYPED_TEST(GradCheckDtypes, FlagsInfAndNaNAnywhere) {
  using T = TypeParam;
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {inf, -inf, std::nanf("")}) {
    std::vector<float> v = rnd.signed_vector(50000, 1e-3f, 1.0f);
    const size_t at = static_cast<size_t>(rnd.integer(0, 49999));
    v[at] = bad;
    const GradStats got = check(zdp::testing::encode<T>(v), 1.0f);
    EXPECT_EQ(got.nonfinite, 1.0f) << bad << " at " << at;
    EXPECT_FALSE(std::isfinite(got.sum_sq));
  }
}

TEST(GradCheck, Fp16OverflowIsFlagged) {
  // 70000 does not fit in fp16: it is stored as +inf, the overflow a loss scaler must see.
  std::vector<float> v(1000, 0.5f);
  v[999] = 70000.0f;
  const GradStats got = check(zdp::testing::encode<Half>(v), 1.0f);
  EXPECT_EQ(got.nonfinite, 1.0f);
}

TEST(GradCheck, HugeFiniteValuesAreNotFlagged) {
  // 1e20^2 overflows fp32 but every element is finite: the flag reports stored values only,
  // and the infinite sum tells the clipping code the norm is unusable.
  std::vector<float> v(100, 0.25f);
  v[3] = 1e20f;
  const GradStats got = check(v, 1.0f);
  EXPECT_EQ(got.nonfinite, 0.0f);
  EXPECT_TRUE(std::isinf(got.sum_sq));
}

TEST(GradCheck, EmptySliceAndBadArguments) {
  GradStats out{5.0f, 5.0f};
  GradCheckArgs a;
  a.out = &out;
  ASSERT_TRUE(grad_check_cpu(a).ok());
  EXPECT_EQ(out.sum_sq, 0.0f);
  EXPECT_EQ(out.nonfinite, 0.0f);
  a.count = 10;
  EXPECT_EQ(grad_check_cpu(a).code(), StatusCode::kInvalidArgument);  // null grad
  std::vector<int64_t> ints(10, 1);
  a.grad = ints.data();
  a.dtype = DType::kI64;
  EXPECT_EQ(grad_check_cpu(a).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
