// THE tolerance rule of zdp's numeric tests, written once. Every kernel test that compares
// an fp32/bf16/fp16 result with a float64 reference uses it; a test that allows more
// says why in a comment at that line.
//
// The rule. Each fp32 rounding of an intermediate value r adds an error of at most
// u * |r| (u = 2^-24, the unit roundoff: half an ulp, relative). The allowed error of a
// result is
//
//     allowed = kSafety * (sum over the roundings i of  u * |r_i| * s_i)
//               + u_store * |ref| + eta_store
//
// where s_i is how strongly the result depends on r_i (1 along chains of additions and
// multiplications by values of magnitude <= 1; the AdamW/SGD references propagate it
// step by step in float64), u_store is the unit roundoff of the type the result is
// stored in when that is narrower than fp32 (bf16 2^-8, fp16 2^-11; 0 for fp32), and
// eta_store is half its smallest subnormal (fp16 2^-25, bf16 2^-134, fp32 2^-150): below
// the normal range spacing is absolute, not relative. This is the first-order forward
// error bound of numerical analysis with the standard model fl(x) = x (1 + d) + e
// (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 2-3); kSafety = 2 covers
// the second-order terms. A result outside it is a bug, not noise.
//
// The common straight-line case -- n roundings, no intermediate larger than `magnitude`
// (for a sum: the sum of the absolute values of its terms, so cancellation cannot hide
// an error) -- is straight_line_bound(n, magnitude).
//
// Comparisons between two implementations of the same operations in the same order (CPU
// thread counts, slices cut at other offsets, CUDA vs CPU) are bit-exact: atol = 0.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "zdp/comm.h"  // zdp::DType

namespace zdp::testing {

inline constexpr double kSafety = 2.0;
inline constexpr double kUnitRoundoffF32 = 0x1p-24;

// Unit roundoff of the type a result is stored in (0 for fp32: no extra narrowing).
inline double store_roundoff(DType stored) {
  switch (stored) {
    case DType::kBF16: return 0x1p-8;
    case DType::kF16: return 0x1p-11;
    default: return 0.0;
  }
}

// kSafety * n * u * magnitude: n fp32 roundings of values no larger than `magnitude`.
inline double straight_line_bound(int roundings, double magnitude) {
  return kSafety * roundings * kUnitRoundoffF32 * magnitude;
}

// Half the smallest subnormal of the stored type: the absolute error of rounding there.
inline double store_underflow(DType stored) {
  switch (stored) {
    case DType::kBF16: return 0x1p-134;
    case DType::kF16: return 0x1p-25;
    default: return 0x1p-150;
  }
}

// The whole rule given the propagated first-order fp32 error `fp32_error` (the sum in
// the formula above, before kSafety) of a result stored as `stored`.
inline double allowed_error(double fp32_error, double ref, DType stored = DType::kF32) {
  return kSafety * fp32_error + store_roundoff(stored) * std::fabs(ref) + store_underflow(stored);
}

// Passes when |got - ref| <= allowed; the message names the index (when >= 0), both
// values, the difference and the allowance.
inline ::testing::AssertionResult within(double got, double ref, double allowed, int64_t index = -1) {
  const double diff = std::fabs(got - ref);
  if (diff <= allowed || (std::isnan(got) && std::isnan(ref))) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(10);
  if (index >= 0) os << "Mismatch at index " << index << ": ";
  os << "got " << got << ", float64 reference " << ref << ", |diff| " << diff << " > allowed " << allowed;
  return ::testing::AssertionFailure() << os.str();
}

// Bit-exact comparison of two arrays (memcmp of each element: two NaNs are equal only
// with the same bits): the first mismatch is reported with its index.
template <typename T>
::testing::AssertionResult bitwise_equal(const std::vector<T>& got, const std::vector<T>& want,
                                         const std::string& what) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << what << ": sizes " << got.size() << " vs " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << what << ": mismatch at index " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace zdp::testing
