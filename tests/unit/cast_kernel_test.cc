// Casts and in-place scaling on the CPU against float64 under the tolerance rule (one
// fp32 rounding, then the narrowing store), and bit-identical to the scalar conversions.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cast.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::allowed_error;
using zdp::testing::TestRandom;
using zdp::testing::within;

template <typename S, typename D>
std::vector<D> cast(const std::vector<S>& src) {
  std::vector<D> dst(src.size());
  CastArgs a;
  a.src = src.data();
  a.src_dtype = zdp::testing::dtype_of<S>();
  a.dst = dst.data();
  a.dst_dtype = zdp::testing::dtype_of<D>();
  a.count = static_cast<int64_t>(src.size());
  const Status st = cast_cpu(a);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dst;
}

template <typename D>
void expect_narrowing_ok(const std::vector<float>& src) {
  const std::vector<D> out = cast<float, D>(src);
  const DType dt = zdp::testing::dtype_of<D>();
  for (size_t i = 0; i < src.size(); ++i) {
    // No fp32 arithmetic, only the narrowing store: allowed_error(0, ...).
    ASSERT_TRUE(within(to_f32(out[i]), src[i], allowed_error(0.0, src[i], dt), static_cast<int64_t>(i)));
    ASSERT_EQ(out[i].bits, from_f32<D>(src[i]).bits) << "index " << i;  // nearest even, as convert.h
  }
}

TEST(CastKernel, NarrowingRoundsToNearest) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const std::vector<float> src = rnd.signed_vector(100003, 1e-4f, 6e4f);  // inside the fp16 range
  expect_narrowing_ok<Bf16>(src);
  expect_narrowing_ok<Half>(src);
  // fp16 subnormals (below 2^-14): the rule's absolute underflow term applies there.
  expect_narrowing_ok<Half>(rnd.signed_vector(20011, 1e-8f, 6e-5f));
}

TEST(CastKernel, WideningIsExact) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const std::vector<float> src = rnd.signed_vector(70001, 1e-3f, 100.0f);
  const std::vector<Bf16> b = zdp::testing::encode<Bf16>(src);
  const std::vector<Half> h = zdp::testing::encode<Half>(src);
  const std::vector<float> fb = cast<Bf16, float>(b), fh = cast<Half, float>(h);
  const std::vector<Half> bh = cast<Bf16, Half>(b);
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(fb[i], to_f32(b[i]));
    ASSERT_EQ(fh[i], to_f32(h[i]));
    ASSERT_EQ(bh[i].bits, from_f32<Half>(to_f32(b[i])).bits);  // bf16 -> fp16 rounds once
  }
  EXPECT_TRUE(zdp::testing::bitwise_equal(cast<float, float>(src), src, "fp32 copy"));
}

template <typename T>
void expect_scale_ok(TestRandom& rnd, float scale) {
  const std::vector<float> src = rnd.signed_vector(50021, 1e-3f, 100.0f);
  std::vector<T> data = zdp::testing::encode<T>(src);
  const std::vector<double> before = zdp::testing::decode(data);
  ScaleArgs a;
  a.data = data.data();
  a.dtype = zdp::testing::dtype_of<T>();
  a.count = static_cast<int64_t>(data.size());
  a.scale = scale;
  ASSERT_TRUE(scale_cpu(a).ok());
  for (size_t i = 0; i < data.size(); ++i) {
    const double ref = before[i] * scale;
    // One fp32 rounding of the product, then the store.
    ASSERT_TRUE(within(to_f32(data[i]), ref,
                       allowed_error(zdp::testing::kUnitRoundoffF32 * std::fabs(ref), ref, a.dtype),
                       static_cast<int64_t>(i)));
  }
}

TEST(CastKernel, ScaleInPlace) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const float scale = rnd.uniform(0.01f, 3.0f);
  expect_scale_ok<float>(rnd, scale);
  expect_scale_ok<Bf16>(rnd, scale);
  expect_scale_ok<Half>(rnd, scale);
  expect_scale_ok<Half>(rnd, 1e-3f);  // many results fp16 subnormals (unscaling by 1/1024)
}

TEST(CastKernel, RejectsBadArguments) {
  std::vector<float> f(4, 1.0f);
  CastArgs a;
  a.src = f.data();
  a.dst = f.data();
  a.src_dtype = DType::kF32;
  a.dst_dtype = DType::kBF16;
  a.count = 4;
  EXPECT_EQ(cast_cpu(a).code(), StatusCode::kInvalidArgument);  // in place, different sizes
  a.dst_dtype = DType::kI64;
  EXPECT_EQ(cast_cpu(a).code(), StatusCode::kInvalidArgument);
  a.count = -1;
  EXPECT_EQ(cast_cpu(a).code(), StatusCode::kInvalidArgument);
  ScaleArgs s;
  s.count = 3;
  EXPECT_EQ(scale_cpu(s).code(), StatusCode::kInvalidArgument);  // null data
}

}  // namespace
}  // namespace zdp::kernels
