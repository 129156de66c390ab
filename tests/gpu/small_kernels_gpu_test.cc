// Five small CUDA kernels against their CPU twins (tests/unit/ checks the CPU side):
//  - exact_sumsq (kernels/exact_sumsq.h): fp32, bf16 and fp16 input, scale != 1, counts
//    that are not multiples of the 256-thread block (one past the grid's 1024 x 256
//    threads), launched as two slices into one record; an inf, a NaN, and a finite x whose
//    x * scale overflows. Compared: every limb raw, with atol 0. Equality is guaranteed,
//    not just likely: each element adds the same three integers to the same limbs on both
//    sides (the same ZDP_HD exact_add_square of the same fp32 y), and integer sums
//    (< 2^63 by the header's 2^32-element limit) do not depend on the order. Also compared:
//    exact_sum_to_double of the record bit for bit, and the non-finite FLAG (> 0). The
//    count behind the flag is not compared: the CPU counts OpenMP threads that saw a
//    non-finite value, the GPU counts CUDA threads.
//  - fold (kernels/fold.h): each in dtype x each out dtype, acc null (a cast) or not, in
//    place over `in` (same dtype) and over `acc` (fp32 out). Bit-identical: one fp32 add
//    and one rounding, the same ZDP_HD code. Two NaNs count as equal (the CPU and the GPU
//    give NaNs different payloads and signs).
//  - decide_step (kernels/step_decision.h): all 32 bytes of StepDecision, bit-identical
//    (one thread, the same double ops, --fmad=false, IEEE division and sqrt), prev_skip
//    included. Covered: no clipping, clipping below and above the norm, a non-finite flag,
//    an overflowed sum, and the exact-records path with and without a non-finite record.
//  - dequantize (kernels/quantize.h), the part quantize_gpu_test leaves out: fp32, bf16
//    and fp16 outputs, int8 and int4, 3 chunks at a stride 48 bytes past the chunk with
//    garbage in the gaps, and one non-finite block. Bit-identical, two NaNs equal.
//  - loss_sum (kernels/loss_sum.h) adds in a different order, so the test checks a bound
//    and not the bits: |gpu - cpu| <= kSafety * R * 2^-53 * |cpu| (double_bound below:
//    straight_line_bound of testing/tolerance.h, but with double's unit roundoff; that
//    helper uses fp32's). R counts the roundings of BOTH sides: the CPU's n - 1 adds, the
//    GPU's ceil(n/256) - 1 strided adds plus 8 halvings, 2 + 2 divisions and 1 + 1 adds into
//    *sum. All terms are positive, so |*sum| bounds every partial. A first=false call adds
//    the first call's bound. That is about 2e-11 relative at n = 100003 (the worst case
//    grows as n u; the orders often agree exactly in practice). A dropped or doubled
//    loss moves the result by about 1/n, far outside the bound. `rounded` equals
//    (float) of the GPU's own *sum to the bit, and lies within the bound plus two fp32
//    half-ulps (2 x 2^-24 |sum|) of the CPU's `rounded`.
// Every GPU output starts from a sentinel that no kernel produces here (-1234.5, a
// sentinel record or StepDecision), never from the CPU's answer. An in-place fold starts
// from its input, and the CPU's result must differ from that input. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/exact_sumsq.h"
#include "kernels/fold.h"
#include "kernels/loss_sum.h"
#include "kernels/quantize.h"
#include "kernels/step_decision.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::DeviceArray;
using zdp::testing::dtype_of;
using zdp::testing::encode;
using zdp::testing::GpuFixture;
using zdp::testing::TestRandom;
using zdp::testing::unwritten;
using zdp::testing::within;

constexpr float kSentinel = zdp::testing::kUnwritten;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The same bits, or both NaN.
template <typename T>
bool same_value(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(to_f32(a)) && std::isnan(to_f32(b)));
}
template <typename T>
size_t count_different(const std::vector<T>& a, const std::vector<T>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += same_value(a[i], b[i]) ? 0 : 1;
  return n;
}
template <typename T>
::testing::AssertionResult same_values(const std::vector<T>& gpu, const std::vector<T>& cpu, const char* what) {
  if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (!same_value(gpu[i], cpu[i])) {
      return ::testing::AssertionFailure() << what << ": index " << i << ": gpu " << to_f32(gpu[i]) << ", cpu "
                                           << to_f32(cpu[i]) << " (" << count_different(gpu, cpu) << " differ)";
    }
  }
  return ::testing::AssertionSuccess();
}

class SmallKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    ASSERT_TRUE(gpu_.init());
  }
  GpuFixture gpu_;
  TestRandom rnd_;
};

// ---- exact_sumsq ----

// x = m 2^k with |m| in [1, 2) and k in [lo, hi]: squares spread over most of the limbs.
std::vector<float> wide_values(TestRandom& rnd, size_t n, int lo, int hi) {
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(rnd.signed_uniform(1.0f, 2.0f), static_cast<int>(rnd.integer(lo, hi)));
  return v;
}

// The record both sides add into (not zero, so a kernel that adds nothing is seen).
ExactSumSq start_record() {
  ExactSumSq r{};
  for (int k = 0; k < kExactLimbs; ++k) r.limb[k] = 0x5a5a5a5 + 7919 * k;
  return r;
}

template <typename T>
void exact_case(GpuFixture& gpu, const std::vector<float>& values, float scale, bool nonfinite) {
  SCOPED_TRACE(std::string(to_string(dtype_of<T>())) + " x " + std::to_string(values.size()));
  const std::vector<T> x = encode<T>(values);
  const int64_t n = static_cast<int64_t>(x.size()), cut = n / 3 + 5;
  ExactSumSq cpu = start_record();
  ASSERT_TRUE(exact_sumsq_cpu({x.data(), dtype_of<T>(), n, scale, &cpu}).ok());
  DeviceArray<T> dx(*gpu.device, x);
  DeviceArray<ExactSumSq> drec(*gpu.device, std::vector<ExactSumSq>{start_record()});
  // Two slices into one record: partial sums in another grouping, the same integers.
  ASSERT_TRUE(exact_sumsq_cuda({dx.data(), dtype_of<T>(), cut, scale, drec.data()}, gpu.cuda_stream()).ok());
  ASSERT_TRUE(exact_sumsq_cuda({dx.data() + cut, dtype_of<T>(), n - cut, scale, drec.data()}, gpu.cuda_stream()).ok());
  gpu.sync();
  const ExactSumSq got = drec.download()[0], start = start_record();
  EXPECT_EQ(cpu.nonfinite > 0, nonfinite) << "the CPU's flag (the case is not what it claims)";
  EXPECT_EQ(got.nonfinite > 0, cpu.nonfinite > 0) << "non-finite flag: gpu " << got.nonfinite << ", cpu " << cpu.nonfinite;
  EXPECT_NE(std::memcmp(got.limb, start.limb, sizeof(start.limb)), 0) << "the GPU added nothing";
  for (int k = 0; k < kExactLimbs; ++k) EXPECT_EQ(got.limb[k], cpu.limb[k]) << "limb " << k;
  bool got_bad = false, cpu_bad = false;
  const double got_v = exact_sum_to_double(&got, 1, &got_bad), cpu_v = exact_sum_to_double(&cpu, 1, &cpu_bad);
  EXPECT_EQ(double_bits(got_v), double_bits(cpu_v)) << got_v << " vs " << cpu_v;
  EXPECT_EQ(got_bad, cpu_bad);
}

TEST_F(SmallKernelsGpu, ExactSumSqRecordsHoldTheCpuIntegers) {
  SCOPED_TRACE(rnd_.trace());
  const size_t n = 1000003;  // 3906 blocks of 256 and a tail of 67; > 1024 x 256: grid-stride
  exact_case<float>(gpu_, wide_values(rnd_, n, -140, 120), 1.0f / 3.0f, false);  // fp32 subnormals to 2^121
  exact_case<Bf16>(gpu_, wide_values(rnd_, n, -140, 120), 0.75f, false);
  exact_case<Half>(gpu_, wide_values(rnd_, 70001, -26, 14), 3.0f, false);  // fp16 subnormals to 2^15
}

TEST_F(SmallKernelsGpu, ExactSumSqFlagsInfNanAndOverflow) {
  SCOPED_TRACE(rnd_.trace());
  std::vector<float> f = wide_values(rnd_, 5001, -20, 20);
  f[1234] = kInf;
  exact_case<float>(gpu_, f, 0.5f, true);
  std::vector<float> b = wide_values(rnd_, 5001, -20, 20);
  b[4321] = 1.5f * 0x1p127f;  // finite in bf16; times 4 overflows fp32
  exact_case<Bf16>(gpu_, b, 4.0f, true);
  std::vector<float> h = wide_values(rnd_, 5001, -10, 10);
  h[77] = kNaN;
  exact_case<Half>(gpu_, h, 1.0f, true);
}

// ---- fold ----

// Signed values in [0.01, 2) and a few special elements: past fp16's range, fp16
// subnormal, inf, NaN, an fp32 overflow of the sum, inf - inf.
void fold_inputs(TestRandom& rnd, size_t n, std::vector<float>& in, std::vector<float>& acc) {
  in = rnd.signed_vector(n, 0.01f, 2.0f);
  acc = rnd.signed_vector(n, 0.01f, 2.0f);
  in[0] = 70000.0f;
  in[1] = 3e-6f, acc[1] = -1e-6f;
  in[2] = kInf;
  acc[3] = kNaN;
  in[4] = 3e38f, acc[4] = 3e38f;
  in[5] = kInf, acc[5] = -kInf;
}

template <typename I, typename O>
void fold_case(GpuFixture& gpu, TestRandom& rnd) {
  SCOPED_TRACE(std::string("fold ") + to_string(dtype_of<I>()) + " -> " + to_string(dtype_of<O>()));
  const int64_t n = 100003;  // the cast's 8-wide vector path and a tail of 3
  std::vector<float> in_f, acc;
  fold_inputs(rnd, static_cast<size_t>(n), in_f, acc);
  const std::vector<I> in = encode<I>(in_f);
  DeviceArray<I> din(*gpu.device, in);
  DeviceArray<float> dacc(*gpu.device, acc);
  for (bool with_acc : {false, true}) {
    std::vector<O> cpu = unwritten<O>(static_cast<size_t>(n));
    ASSERT_TRUE(fold_cpu({in.data(), dtype_of<I>(), with_acc ? acc.data() : nullptr, cpu.data(), dtype_of<O>(), n}).ok());
    DeviceArray<O> dout(*gpu.device, unwritten<O>(static_cast<size_t>(n)));
    ASSERT_TRUE(fold_cuda({din.data(), dtype_of<I>(), with_acc ? dacc.data() : nullptr, dout.data(), dtype_of<O>(), n},
                          gpu.cuda_stream())
                    .ok());
    gpu.sync();
    EXPECT_TRUE(same_values(dout.download(), cpu, with_acc ? "fold" : "fold without acc (a cast)"));
  }
  {  // views one element in: not 16-byte aligned, so the scalar path, the same values
    std::vector<O> cpu = unwritten<O>(static_cast<size_t>(n - 1));
    ASSERT_TRUE(fold_cpu({in.data() + 1, dtype_of<I>(), acc.data() + 1, cpu.data(), dtype_of<O>(), n - 1}).ok());
    DeviceArray<O> dout(*gpu.device, unwritten<O>(static_cast<size_t>(n)));
    ASSERT_TRUE(
        fold_cuda({din.data() + 1, dtype_of<I>(), dacc.data() + 1, dout.data() + 1, dtype_of<O>(), n - 1},
                  gpu.cuda_stream())
            .ok());
    gpu.sync();
    const std::vector<O> got = dout.download();
    EXPECT_TRUE(same_values(std::vector<O>(got.begin() + 1, got.end()), cpu, "fold of unaligned views"));
  }
  if constexpr (std::is_same_v<I, O>) {  // in place over the gradient
    std::vector<I> cpu = in;
    ASSERT_TRUE(fold_cpu({cpu.data(), dtype_of<I>(), acc.data(), cpu.data(), dtype_of<I>(), n}).ok());
    EXPECT_GT(count_different(cpu, in), static_cast<size_t>(n) * 9 / 10) << "in place: the input must change";
    DeviceArray<I> dio(*gpu.device, in);
    ASSERT_TRUE(fold_cuda({dio.data(), dtype_of<I>(), dacc.data(), dio.data(), dtype_of<I>(), n}, gpu.cuda_stream()).ok());
    gpu.sync();
    EXPECT_TRUE(same_values(dio.download(), cpu, "fold in place over in"));
  }
  if constexpr (std::is_same_v<O, float>) {  // in place over the fp32 accumulation
    std::vector<float> cpu = acc;
    ASSERT_TRUE(fold_cpu({in.data(), dtype_of<I>(), cpu.data(), cpu.data(), DType::kF32, n}).ok());
    EXPECT_GT(count_different(cpu, acc), static_cast<size_t>(n) * 9 / 10) << "in place: the accumulation must change";
    DeviceArray<float> dio(*gpu.device, acc);
    ASSERT_TRUE(fold_cuda({din.data(), dtype_of<I>(), dio.data(), dio.data(), DType::kF32, n}, gpu.cuda_stream()).ok());
    gpu.sync();
    EXPECT_TRUE(same_values(dio.download(), cpu, "fold in place over acc"));
  }
}

template <typename I>
void fold_every_output(GpuFixture& gpu, TestRandom& rnd) {
  fold_case<I, float>(gpu, rnd);
  fold_case<I, Bf16>(gpu, rnd);
  fold_case<I, Half>(gpu, rnd);
}

TEST_F(SmallKernelsGpu, FoldFp32InputIsBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  fold_every_output<float>(gpu_, rnd_);
}
TEST_F(SmallKernelsGpu, FoldBf16InputIsBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  fold_every_output<Bf16>(gpu_, rnd_);
}
TEST_F(SmallKernelsGpu, FoldFp16InputIsBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  fold_every_output<Half>(gpu_, rnd_);
}

// ---- decide_step ----

// What `out` holds before a decision: `skip` (to become prev_skip), the rest impossible.
StepDecision start_decision(int32_t skip) {
  StepDecision d;
  d.grad_scale = kSentinel;
  d.skip = skip;
  d.prev_skip = 77;
  d.reserved = 77;
  d.grad_norm = kSentinel;
  d.clip_coef = kSentinel;
  return d;
}

std::string describe(const StepDecision& d) {
  std::ostringstream os;
  os.precision(17);
  os << "{scale " << d.grad_scale << ", skip " << d.skip << ", prev_skip " << d.prev_skip << ", reserved " << d.reserved
     << ", norm " << d.grad_norm << ", clip " << d.clip_coef << "}";
  return os.str();
}

// Decides on both sides from the same `out` (skip = prev_skip) and compares all 32 bytes;
// returns the CPU's decision.
StepDecision decide_both(GpuFixture& gpu, const StepDecisionArgs& args, int32_t prev_skip) {
  StepDecision cpu = start_decision(prev_skip);
  StepDecisionArgs c = args;
  c.out = &cpu;
  EXPECT_TRUE(decide_step_cpu(c).ok());
  DeviceArray<GradStats> dstats(*gpu.device, std::vector<GradStats>(args.stats, args.stats + args.buckets));
  DeviceArray<ExactSumSq> dexact(*gpu.device,
                                 std::vector<ExactSumSq>(args.exact, args.exact + args.exact_records));
  DeviceArray<StepDecision> dout(*gpu.device, std::vector<StepDecision>{start_decision(prev_skip)});
  StepDecisionArgs g = args;
  g.stats = args.stats != nullptr ? dstats.data() : nullptr;  // the exact path is chosen by a non-null pointer
  g.exact = args.exact != nullptr ? dexact.data() : nullptr;
  g.out = dout.data();
  EXPECT_TRUE(decide_step_cuda(g, gpu.cuda_stream()).ok());
  gpu.sync();
  const StepDecision got = dout.download()[0];
  EXPECT_EQ(std::memcmp(&got, &cpu, sizeof(cpu)), 0) << "gpu " << describe(got) << "\ncpu " << describe(cpu);
  EXPECT_EQ(cpu.prev_skip, prev_skip);
  return cpu;
}

TEST_F(SmallKernelsGpu, StepDecisionFromStatisticsIsBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  std::vector<GradStats> stats(37);
  double sum = 0.0;
  for (GradStats& s : stats) sum += (s.sum_sq = rnd_.uniform(0.01f, 50.0f));
  const double norm = std::sqrt(static_cast<double>(static_cast<float>(sum)));
  StepDecisionArgs a{stats.data(), static_cast<int64_t>(stats.size()), 1.0 / (4 * 3 * 1024.0), 0.0, nullptr};
  EXPECT_EQ(decide_both(gpu_, a, 0).clip_coef, 1.0);  // no clipping
  a.max_norm = 0.3 * norm;
  const StepDecision clipped = decide_both(gpu_, a, 1);
  EXPECT_LT(clipped.clip_coef, 1.0);
  EXPECT_EQ(clipped.skip, 0);
  a.max_norm = 2.0 * norm;  // clipping on, the norm below the threshold
  EXPECT_EQ(decide_both(gpu_, a, 0).clip_coef, 1.0);
  stats[20].nonfinite = 1.0f;  // one bucket saw an inf or NaN
  EXPECT_EQ(decide_both(gpu_, a, 0).skip, 1);
  stats[20].nonfinite = 0.0f;
  stats[7].sum_sq = kInf;  // the squares overflowed fp32
  EXPECT_EQ(decide_both(gpu_, a, 1).skip, 1);
}

TEST_F(SmallKernelsGpu, StepDecisionFromExactRecordsIsBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  std::vector<ExactSumSq> records(3);  // three ranks' records, zeroed
  for (ExactSumSq& r : records) {
    const std::vector<float> g = rnd_.signed_vector(10007, 1e-4f, 1.0f);
    ASSERT_TRUE(exact_sumsq_cpu({g.data(), DType::kF32, static_cast<int64_t>(g.size()), 0.5f, &r}).ok());
  }
  StepDecisionArgs a;
  a.inv_scale = 0.25;
  a.exact = records.data();
  a.exact_records = static_cast<int64_t>(records.size());
  const StepDecision plain = decide_both(gpu_, a, 1);
  EXPECT_EQ(plain.skip, 0);
  EXPECT_GT(plain.grad_norm, 1.0);  // about sqrt(30021 / 12) = 50
  a.max_norm = 1.0;
  EXPECT_LT(decide_both(gpu_, a, 0).clip_coef, 0.1);
  records[1].nonfinite = 1;
  const StepDecision skipped = decide_both(gpu_, a, 0);
  EXPECT_EQ(skipped.skip, 1);
  EXPECT_TRUE(std::isinf(skipped.grad_norm)) << "a skip reports an infinite norm, not the finite rest's";
}

// ---- loss_sum ----

// kSafety x roundings x double's unit roundoff x magnitude (straight_line_bound for double).
double double_bound(int64_t roundings, double magnitude) {
  return zdp::testing::kSafety * static_cast<double>(roundings) * 0x1p-53 * magnitude;
}
// Roundings of one loss_sum call, both sides together (the file comment).
int64_t loss_sum_roundings(int64_t n) { return (n - 1) + ((n + 255) / 256 - 1 + 8) + 4 + 2; }

TEST_F(SmallKernelsGpu, LossSumWithinTheSummationOrderBound) {
  SCOPED_TRACE(rnd_.trace());
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{100003}}) {
    SCOPED_TRACE("count " + std::to_string(n));
    const double divide_by = 3.0;  // accum_steps
    const std::vector<float> l1 = rnd_.positive_vector(n, 0.5f, 8.0f), l2 = rnd_.positive_vector(n, 0.5f, 8.0f);
    // The step's first micro-batch (*sum from 0), then its last (added on, rounded).
    double cpu_sum = kSentinel;
    float cpu_rounded = kSentinel;
    ASSERT_TRUE(loss_sum_cpu({l1.data(), n, divide_by, &cpu_sum, true, nullptr}).ok());
    const double cpu_first = cpu_sum;
    ASSERT_TRUE(loss_sum_cpu({l2.data(), n, divide_by, &cpu_sum, false, &cpu_rounded}).ok());
    DeviceArray<float> d1(*gpu_.device, l1), d2(*gpu_.device, l2);
    DeviceArray<double> dsum(*gpu_.device, std::vector<double>{kSentinel});
    DeviceArray<float> drounded(*gpu_.device, std::vector<float>{kSentinel});
    ASSERT_TRUE(loss_sum_cuda({d1.data(), n, divide_by, dsum.data(), true, nullptr}, gpu_.cuda_stream()).ok());
    gpu_.sync();
    const double gpu_first = dsum.download()[0];
    ASSERT_TRUE(loss_sum_cuda({d2.data(), n, divide_by, dsum.data(), false, drounded.data()}, gpu_.cuda_stream()).ok());
    gpu_.sync();
    const double gpu_sum = dsum.download()[0];
    const float gpu_rounded = drounded.download()[0];
    const double first_bound = double_bound(loss_sum_roundings(n), cpu_first);
    EXPECT_TRUE(within(gpu_first, cpu_first, first_bound)) << "first=true";
    const double bound = first_bound + double_bound(loss_sum_roundings(n), cpu_sum);
    EXPECT_TRUE(within(gpu_sum, cpu_sum, bound)) << "first=false";
    const float own = static_cast<float>(gpu_sum);
    EXPECT_EQ(std::memcmp(&gpu_rounded, &own, sizeof(own)), 0) << gpu_rounded << " is not (float) " << gpu_sum;
    EXPECT_TRUE(within(gpu_rounded, cpu_rounded, bound + 2 * zdp::testing::kUnitRoundoffF32 * cpu_sum)) << "rounded";
  }
}

// ---- dequantize ----

template <typename O>
void dequantize_case(GpuFixture& gpu, TestRandom& rnd, int bits, int64_t n) {
  SCOPED_TRACE(std::string("dequantize int") + std::to_string(bits) + " -> " + to_string(dtype_of<O>()) + ", count " +
               std::to_string(n));
  constexpr int kChunks = 3;
  const int64_t stride = quant_chunk_bytes(n, bits) + 48;  // past the chunk, a multiple of 16
  std::vector<char> wire(static_cast<size_t>(kChunks * stride), static_cast<char>(0xa5));  // garbage in the gaps
  for (int c = 0; c < kChunks; ++c) {
    std::vector<float> v = rnd.signed_vector(static_cast<size_t>(n), 1e-4f, 1.0f);
    if (c == 1) v[300] = kInf;  // block 1 of chunk 1: an infinite scale, NaN values
    ASSERT_TRUE(quantize_cpu(QuantizeArgs{v.data(), DType::kF32, nullptr, n, bits, wire.data() + c * stride}).ok());
  }
  std::vector<O> cpu = unwritten<O>(static_cast<size_t>(kChunks * n));
  ASSERT_TRUE(dequantize_cpu(DequantizeArgs{wire.data(), stride, kChunks, n, bits, cpu.data(), dtype_of<O>()}).ok());
  DeviceArray<char> dwire(*gpu.device, wire);
  DeviceArray<O> dout(*gpu.device, unwritten<O>(static_cast<size_t>(kChunks * n)));
  ASSERT_TRUE(dequantize_cuda(DequantizeArgs{dwire.data(), stride, kChunks, n, bits, dout.data(), dtype_of<O>()},
                              gpu.cuda_stream())
                  .ok());
  gpu.sync();
  EXPECT_TRUE(same_values(dout.download(), cpu, "dequantized"));
}

TEST_F(SmallKernelsGpu, DequantizeEachOutputDtypeAtAStridePastTheChunk) {
  SCOPED_TRACE(rnd_.trace());
  for (int bits : {8, 4}) {
    // 4 blocks (an odd count: int4's last byte is half used); 3 x 400009 > 4096 x 256
    // threads: the grid-stride loop.
    for (int64_t n : {int64_t{1003}, int64_t{400009}}) {
      dequantize_case<float>(gpu_, rnd_, bits, n);
      dequantize_case<Bf16>(gpu_, rnd_, bits, n);
      dequantize_case<Half>(gpu_, rnd_, bits, n);
    }
  }
}

}  // namespace
}  // namespace zdp::kernels
