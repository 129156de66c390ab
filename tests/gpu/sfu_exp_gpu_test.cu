// cuda::exp_sfu (kernels/cuda/nn_common.cuh), the cross-entropy's exponential on the GPU,
// against float64 exp: within its stated (2 + 1.173 |x|) ulp wherever the result is at
// least 2^-126, 0 or about 2^-126 below that (flushed), over every float in [-104, 0] (the
// softmax's shifted logits: 0 at the row's maximum, and past e^-104 every result is 0)
// taken 1 in 64 plus a sweep of [0, 88], and its special values. Skips without a GPU.
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

TEST_F(SfuExpGpu, WithinItsBoundOverTheSoftmaxRange) {
  std::vector<float> in;
  in.reserve((float_bits(-104.0f) - float_bits(-0.0f)) / 64 + 80000);
  for (uint32_t u = float_bits(-0.0f); u <= float_bits(-104.0f); u += 64) in.push_back(bits_float(u));  // -0 .. -104
  for (uint32_t u = 0; u <= float_bits(88.0f); u += 4093) in.push_back(bits_float(u));  // 0 .. 88, for exp in general
  const std::vector<float> out = exp_on_gpu(gpu_, in);
  ASSERT_EQ(out.size(), in.size());
  double worst_ulps = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i], ref = std::exp(x);
    // At the flush threshold the rounded product x log2(e) may land on either side of -126.
    if (ref < 0x1p-126 * (1 + 0x1p-12)) {
      ASSERT_TRUE(out[i] >= 0.0f && out[i] <= 0x1p-126 * (1 + 0x1p-11)) << "exp_sfu(" << x << ") = " << out[i] << ", exact " << ref;
      continue;
    }
    const double ulps = std::fabs(out[i] - ref) / ulp_of(ref), allowed = 2 + 1.173 * std::fabs(x);
    ASSERT_LE(ulps, allowed) << "exp_sfu(" << x << ") = " << out[i] << ", exact " << ref;
    worst_ulps = std::max(worst_ulps, ulps - allowed);
  }
  std::printf("exp_sfu over %zu values: worst error %.2f ulp from its bound (<= 0)\n", in.size(), worst_ulps);
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
