// fp32 <-> fp16/bf16 conversions against an independent float64 reference: the nearest
// representable value, ties to the even encoding.
#include "kernels/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace zdp::kernels {
namespace {

// Reference rounding: among all finite encodings (sorted by value) pick the nearest to
// x in float64, ties to the even encoding; beyond max + half an ulp -> inf.
class NearestEncoding {
 public:
  explicit NearestEncoding(float (*decode)(uint16_t)) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
      const float v = decode(static_cast<uint16_t>(b));
      if (std::isfinite(v) && !(v == 0.0f && std::signbit(v))) values_.push_back({v, static_cast<uint16_t>(b)});
    }
    std::sort(values_.begin(), values_.end(), [](auto& a, auto& b) { return a.first < b.first; });
  }

  // Expected encoding of finite x; `inf_bits` for overflow.
  uint16_t round(float x, uint16_t pos_inf, uint16_t neg_inf) const {
    const double xd = x;
    auto hi = std::lower_bound(values_.begin(), values_.end(), x, [](auto& e, float v) { return e.first < v; });
    if (hi == values_.end()) return overflow(xd, pos_inf);
    if (hi == values_.begin()) return hi->first == x ? hi->second : overflow(xd, neg_inf);
    if (hi->first == x) return x == 0.0f && std::signbit(x) ? static_cast<uint16_t>(0x8000) : hi->second;
    auto lo = hi - 1;
    const double dl = xd - lo->first, dh = static_cast<double>(hi->first) - xd;
    uint16_t pick;
    if (dl < dh) pick = lo->second;
    else if (dh < dl) pick = hi->second;
    else pick = (lo->second & 1u) == 0 ? lo->second : hi->second;
    // Zero results keep the sign of x.
    if ((pick & 0x7fffu) == 0 && std::signbit(x)) pick = 0x8000;
    return pick;
  }

 private:
  uint16_t overflow(double xd, uint16_t inf) const {
    // Round to inf when |x| >= max + ulp(max)/2 (the midpoint to the next power).
    const double max = values_.back().first;
    const double prev = values_[values_.size() - 2].first;
    const double limit = max + (max - prev) / 2;
    if (std::fabs(xd) >= limit) return inf;
    return xd > 0 ? values_.back().second : values_.front().second;
  }
  std::vector<std::pair<float, uint16_t>> values_;
};

std::vector<float> probe_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 65504.0f, 65519.0f, 65520.0f, 70000.0f, -65520.0f,
                          6.0e-8f, 2.98e-8f, 2.9802322e-8f, 5.9604645e-8f, 6.1035156e-5f, 6.1e-5f,
                          3.3895314e38f, 1e-40f, std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_float(bits(rng));
    if (std::isfinite(f)) v.push_back(f);
  }
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) v.push_back(small(rng));
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 100000; ++i) v.push_back(tiny(rng));
  // Exact midpoints between neighbouring halves exercise ties-to-even.
  for (uint32_t b = 0; b < 0x7bff; b += 37) {
    const double a = f16_to_f32(static_cast<uint16_t>(b)), c = f16_to_f32(static_cast<uint16_t>(b + 1));
    v.push_back(static_cast<float>((a + c) / 2));
  }
  return v;
}

TEST(Convert, F16DecodeRoundTripsEveryEncoding) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = f16_to_f32(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << "NaN 0x" << std::hex << b;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "round trip of half 0x" << std::hex << b << " (" << f << ")";
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604644775390625e-8f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
}

TEST(Convert, Bf16DecodeRoundTripsEveryEncoding) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = bf16_to_f32(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), h) << "round trip of bf16 0x" << std::hex << b;
  }
}

TEST(Convert, F32ToF16IsNearestEven) {
  const NearestEncoding ref(&f16_to_f32);
  for (float x : probe_values()) {
    ASSERT_EQ(f32_to_f16(x), ref.round(x, 0x7c00, 0xfc00)) << "x = " << x;
  }
}

TEST(Convert, F32ToBf16IsNearestEven) {
  const NearestEncoding ref(&bf16_to_f32);
  for (float x : probe_values()) {
    ASSERT_EQ(f32_to_bf16(x), ref.round(x, 0x7f80, 0xff80)) << "x = " << x;
  }
}

TEST(Convert, InfinitiesAndNaNsSurvive) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-inf), 0xfc00);
  EXPECT_EQ(f32_to_bf16(inf), 0x7f80);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace zdp::kernels
