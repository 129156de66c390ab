// The exact sum of squares of a gradient, for deterministic mode (train.deterministic):
// the global norm must come out the same bits whatever the world size and stage, but the
// slices it is summed over are cut differently at every K, and floating-point addition
// is not associative. So no floating-point addition is done: each element y = x * scale
// (rounded to fp32, as grad_check.h does) is squared in double (exact: 24-bit mantissas,
// a 48-bit product, exponents far inside double's range) and added into a fixed-point
// integer of kExactLimbs limbs of kExactLimbBits bits whose lowest bit is 2^-kExactLsb:
// wide enough that every square of a finite fp32 value lands in it without rounding
// (2^-298 ... 2^256). Integer addition is associative, so partial records summed in any
// order, on any number of ranks (an int64 all-reduce), by CUDA atomics in any order,
// give the same integer: the exact sum. The only rounding is exact_sum_to_double's, of
// that one integer, in a fixed order (within an ulp or two of the correctly rounded
// value, and the same bits wherever it runs). A non-finite y sets the flag instead.
//
// Limits: every element adds less than 2^31 to a limb, so a record (and the sum over all
// ranks) stays exact up to 2^32 elements; the engine refuses deterministic mode for larger
// models (Engine::finalize).
#pragma once

#include "kernels/common.h"

namespace zdp::kernels {

inline constexpr int kExactLimbs = 21;     // 630 bits
inline constexpr int kExactLimbBits = 30;  // each limb holds 30 bits after normalisation
inline constexpr int kExactLsb = 352;      // bit 0 of limb 0 is 2^-352
inline constexpr int64_t kExactMaxElements = int64_t{1} << 32;

struct ExactSumSq {
  int64_t limb[kExactLimbs];  // value = sum_k limb[k] * 2^(30 k - 352); limbs may exceed 30 bits
  int64_t nonfinite;          // > 0 when any element was inf or NaN
};
static_assert(sizeof(ExactSumSq) == (kExactLimbs + 1) * sizeof(int64_t), "reduced as int64 values");
inline constexpr int64_t kExactSumSqWords = kExactLimbs + 1;

struct ExactSumSqArgs {
  const void* grad = nullptr;
  DType dtype = DType::kF32;  // fp32, bf16 or fp16
  int64_t count = 0;
  float scale = 1.0f;          // squares of (x * scale), as GradCheckArgs::scale
  ExactSumSq* out = nullptr;   // ADDED into (zero it first); host memory (CPU) or device (CUDA)
};

ZDP_HD uint64_t double_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
#endif
}

// Adds y^2 (y finite) into three limbs of `limb` (the caller's record or registers).
ZDP_HD void exact_add_square(float y, int64_t* limb) {
  const double t = static_cast<double>(y) * static_cast<double>(y);
  const uint64_t bits = double_bits(t);
  const int e = static_cast<int>((bits >> 52) & 0x7ff);
  if (e == 0) return;  // t == 0 (a square of an fp32 value is never a double subnormal)
  const uint64_t mant = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);  // t = mant 2^(e - 1075)
  const int pos = e - 1075 + kExactLsb;  // >= 2 for every fp32 square
  const int i = pos / kExactLimbBits, off = pos % kExactLimbBits;
  const uint64_t mask = (uint64_t{1} << kExactLimbBits) - 1;
  const uint64_t lo = (mant & mask) << off;   // < 2^59
  const uint64_t hi = (mant >> kExactLimbBits) << off;  // < 2^52
  limb[i] += static_cast<int64_t>(lo & mask);
  limb[i + 1] += static_cast<int64_t>((lo >> kExactLimbBits) + (hi & mask));
  limb[i + 2] += static_cast<int64_t>(hi >> kExactLimbBits);
}

// Sums `count` records (integers: any order gives the same), carries them into 30-bit
// limbs and rounds the value to double, top limb first in a fixed order (exact up to 53
// significant bits, then rounded at each step: the same bits everywhere, not always the
// correctly rounded ones). Host and device.
ZDP_HD double exact_sum_to_double(const ExactSumSq* records, int64_t count, bool* nonfinite) {
  int64_t limb[kExactLimbs] = {};
  int64_t bad = 0;
  for (int64_t r = 0; r < count; ++r) {
    for (int k = 0; k < kExactLimbs; ++k) limb[k] += records[r].limb[k];
    bad += records[r].nonfinite;
  }
  int64_t carry = 0;
  for (int k = 0; k < kExactLimbs; ++k) {
    const int64_t v = limb[k] + carry;
    limb[k] = v & ((int64_t{1} << kExactLimbBits) - 1);
    carry = v >> kExactLimbBits;
  }
  // Top limb first, exact while the value has at most 53 significant bits, then rounded
  // in a fixed order: the same bits wherever this runs. The top limb absorbs the carry.
  double v = static_cast<double>(limb[kExactLimbs - 1] + (carry << kExactLimbBits));
  for (int k = kExactLimbs - 2; k >= 0; --k) v = v * 1073741824.0 + static_cast<double>(limb[k]);  // 2^30
  for (int s = 0; s < kExactLsb / 32; ++s) v *= 2.3283064365386963e-10;                              // 2^-32, 11 times
  *nonfinite = bad > 0;
  return v;
}

// Runs on the calling thread (and its OpenMP team; the result does not depend on it).
Status exact_sumsq_cpu(const ExactSumSqArgs& args);
// Enqueues on `stream` (integer atomics into args.out). kUnavailable without CUDA.
Status exact_sumsq_cuda(const ExactSumSqArgs& args, cudaStream_t stream);
Status check_exact_sumsq_args(const ExactSumSqArgs& args);

}  // namespace zdp::kernels
