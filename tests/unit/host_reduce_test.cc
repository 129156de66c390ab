// Host reductions of the Gloo backend against float64 references: one rounding per combine.
#include "runtime/src/comm/host_reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/convert.h"

namespace zdp {
namespace {

using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

TEST(HostReduce, Fp32SumAndMaxMatchFloat64RoundedOnce) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const size_t n = 1001;
  std::vector<float> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) a[i] = dist(rng), b[i] = dist(rng);
  host_reduce_fn(DType::kF32, ReduceOp::kSum)(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], static_cast<float>(static_cast<double>(a[i]) + b[i])) << "Mismatch at index " << i;
  }
  host_reduce_fn(DType::kF32, ReduceOp::kMax)(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], std::max(a[i], b[i])) << "Mismatch at index " << i;
}

TEST(HostReduce, Int64IsExactBeyondDoublePrecision) {
  const int64_t big = (int64_t{1} << 60) + 1;  // not representable in a double
  std::vector<int64_t> a = {big, -5, 0}, b = {3, 7, -(int64_t{1} << 62)}, out(3);
  host_reduce_fn(DType::kI64, ReduceOp::kSum)(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out[0], big + 3);
  EXPECT_EQ(out[1], 2);
  EXPECT_EQ(out[2], -(int64_t{1} << 62));
  host_reduce_fn(DType::kI64, ReduceOp::kMax)(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out[0], big);
  EXPECT_EQ(out[1], 7);
}

// 16-bit formats: the result is the float64 sum of the decoded inputs rounded once.
void check_16(DType dtype, float (*dec)(uint16_t), uint16_t (*enc)(float)) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  const size_t n = 4097;
  std::vector<uint16_t> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) a[i] = enc(dist(rng)), b[i] = enc(dist(rng));
  host_reduce_fn(dtype, ReduceOp::kSum)(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) {
    // The fp32 sum of two 16-bit values is exact (their exponents differ by < 24 here),
    // so rounding it once to 16 bits is the correctly rounded result.
    const double exact = static_cast<double>(dec(a[i])) + dec(b[i]);
    ASSERT_EQ(out[i], enc(static_cast<float>(exact))) << to_string(dtype) << " mismatch at index " << i;
  }
  host_reduce_fn(dtype, ReduceOp::kMax)(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(dec(out[i]), std::max(dec(a[i]), dec(b[i]))) << "index " << i;
  // In place (out aliases a), as the ring reduce-scatter uses it.
  std::vector<uint16_t> acc = a;
  host_reduce_fn(dtype, ReduceOp::kSum)(acc.data(), acc.data(), b.data(), n);
  host_reduce_fn(dtype, ReduceOp::kSum)(out.data(), a.data(), b.data(), n);
  EXPECT_EQ(acc, out);
}

TEST(HostReduce, Fp16SumRoundsOnce) { check_16(DType::kF16, &f16_to_f32, &f32_to_f16); }
TEST(HostReduce, Bf16SumRoundsOnce) { check_16(DType::kBF16, &bf16_to_f32, &f32_to_bf16); }

TEST(HostReduce, ScaleForAverage) {
  std::vector<float> f = {3.0f, -6.0f};
  host_scale(f.data(), 2, DType::kF32, 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], -2.0f);
  std::vector<uint16_t> h = {f32_to_bf16(12.0f), f32_to_f16(12.0f)};
  host_scale(&h[0], 1, DType::kBF16, 0.25f);
  host_scale(&h[1], 1, DType::kF16, 0.25f);
  EXPECT_EQ(bf16_to_f32(h[0]), 3.0f);
  EXPECT_EQ(f16_to_f32(h[1]), 3.0f);
}

}  // namespace
}  // namespace zdp
