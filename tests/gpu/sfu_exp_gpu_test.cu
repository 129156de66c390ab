// cuda::exp_sfu (kernels/cuda/nn_common.cuh), the cross-entropy's exponential on the GPU,
// against float64, its two bounds each: the instruction, ex2.approx of the product p the
// device rounds (the host's IEEE product has the same bits), within 2.5 ulp of 2^p (the
// PTX ISA's 2 ulp from the correctly rounded result); and the whole, within (2.5 + 1.25
// |x|) ulp of e^x. Wherever the result is at least 2^-126; below that 0 or about 2^-126
// (flushed). Over every float in [-104, 0] (the softmax's shifted logits: 0 at the row's
// maximum, and past e^-104 every result is 0) taken 1 in 64 plus a sweep of [0, 88], and
// its special values. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <vector>

#include "kernels/common.h"
#include "kernels/cuda/nn_common.cuh"
#include "testing/device_arrays.h"

namespace zdp::kernels {
namespace {

__global__ void exp_all(const float* in, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = cuda::exp_sfu(in[i]);
}

// exp_sfu of each of `in`, on the fixture's stream.
std::vector<float> exp_on_gpu(testing::GpuFixture& gpu, const std::vector<float>& in) {
  testing::DeviceArray<float> din(*gpu.device, in), dout(*gpu.device, testing::unwritten_like(in));
  exp_all<<<512, 256, 0, gpu.cuda_stream()>>>(din.data(), dout.data(), static_cast<int>(in.size()));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  gpu.sync();
  return dout.download();
}

class SfuExpGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    ASSERT_TRUE(gpu_.init());
  }
  testing::GpuFixture gpu_;
};

// One ulp of a float near v (v >= 2^-126): 2^(exponent - 23).
double ulp_of(double v) { return std::ldexp(1.0, std::ilogb(v) - 23); }
// |got - exact| in ulps of the larger of the two: next to a power of two "2 ulp from the
// correctly rounded result" counts floats, whose spacing doubles above it. Simulated with
// a correctly rounded ex2 moved 2 floats either way over this test's inputs, both bounds
// below are met with nothing to spare; the slack covers the doubles' own rounding.
double ulps_apart(double got, double exact) { return std::fabs(got - exact) / ulp_of(std::max(got, exact)); }
constexpr double kSlack = 1e-6;

TEST_F(SfuExpGpu, WithinItsBoundOverTheSoftmaxRange) {
  std::vector<float> in;
  in.reserve((float_bits(-104.0f) - float_bits(-0.0f)) / 64 + 80000);
  for (uint32_t u = float_bits(-0.0f); u <= float_bits(-104.0f); u += 64) in.push_back(bits_float(u));  // -0 .. -104
  for (uint32_t u = 0; u <= float_bits(88.0f); u += 4093) in.push_back(bits_float(u));  // 0 .. 88, for exp in general
  const std::vector<float> out = exp_on_gpu(gpu_, in);
  ASSERT_EQ(out.size(), in.size());
  double worst_ex2 = 0, worst_exp = -1e9;
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i], ref = std::exp(x);
    // At the flush threshold the rounded product x log2(e) may land on either side of -126.
    if (ref < 0x1p-126 * (1 + 0x1p-12)) {
      ASSERT_TRUE(out[i] >= 0.0f && out[i] <= 0x1p-126 * (1 + 0x1p-11)) << "exp_sfu(" << x << ") = " << out[i] << ", exact " << ref;
      continue;
    }
    // The instruction: against 2^p of the very product the device computed (an IEEE
    // product of two floats, rounded to nearest: the same bits here, and the kernels are
    // built with --fmad=false, so nothing fuses it).
    const volatile float product = in[i] * 1.44269504088896341f;
    const double ref2 = std::exp2(static_cast<double>(product));
    if (ref2 >= 0x1p-126) {
      const double ex2_ulps = ulps_apart(out[i], ref2);
      ASSERT_LE(ex2_ulps, 2.5 + kSlack) << "ex2.approx(" << product << ") = " << out[i] << ", exact " << ref2 << " (x = " << x << ")";
      worst_ex2 = std::max(worst_ex2, ex2_ulps);
    }
    const double ulps = ulps_apart(out[i], ref), allowed = 2.5 + 1.25 * std::fabs(x) + kSlack;
    ASSERT_LE(ulps, allowed) << "exp_sfu(" << x << ") = " << out[i] << ", exact " << ref;
    worst_exp = std::max(worst_exp, ulps - allowed);
  }
  std::printf("exp_sfu over %zu values: ex2.approx at most %.2f ulp from 2^p (<= 2.5); e^x at worst %.2f ulp from "
              "its bound (<= 0)\n",
              in.size(), worst_ex2, worst_exp);
}

TEST_F(SfuExpGpu, SpecialValues) {
  const float inf = INFINITY;
  const std::vector<float> out = exp_on_gpu(gpu_, {0.0f, -0.0f, -inf, inf, NAN, -1000.0f, 1000.0f});
  EXPECT_LE(std::fabs(out[0] - 1.0), 2 * 0x1p-24) << "exp_sfu(0) = " << out[0];  // 2 ulp below 1
  EXPECT_LE(std::fabs(out[1] - 1.0), 2 * 0x1p-24) << "exp_sfu(-0) = " << out[1];
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], inf);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_EQ(out[6], inf);
}

}  // namespace
}  // namespace zdp::kernels
