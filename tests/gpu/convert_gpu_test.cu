// The fp16/bf16 conversions of kernels/convert.h on the GPU give the very bits the CPU
// gives, for every 16-bit encoding and for a sweep of fp32 values (the CPU path is
// checked against a float64 reference in tests/unit/convert_test.cc).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/convert.h"
#include "zdp/device.h"

namespace zdp::kernels {
namespace {

__global__ void decode_all(float* f16_out, float* bf16_out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < 0x10000u; i += gridDim.x * blockDim.x) {
    f16_out[i] = f16_to_f32(static_cast<uint16_t>(i));
    bf16_out[i] = bf16_to_f32(static_cast<uint16_t>(i));
  }
}

__global__ void encode_all(const float* in, uint16_t* f16_out, uint16_t* bf16_out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    f16_out[i] = f32_to_f16(in[i]);
    bf16_out[i] = f32_to_bf16(in[i]);
  }
}

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

TEST(ConvertGpu, DecodeMatchesCpuForEveryEncoding) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  float *d16 = nullptr, *db16 = nullptr;
  ASSERT_CUDA(cudaMalloc(&d16, 0x10000 * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&db16, 0x10000 * sizeof(float)));
  decode_all<<<64, 256>>>(d16, db16);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<float> h16(0x10000), hb16(0x10000);
  ASSERT_CUDA(cudaMemcpy(h16.data(), d16, h16.size() * sizeof(float), cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(hb16.data(), db16, hb16.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const float c16 = f16_to_f32(static_cast<uint16_t>(i)), cb16 = bf16_to_f32(static_cast<uint16_t>(i));
    ASSERT_EQ(float_bits(h16[i]), float_bits(c16)) << "fp16 0x" << std::hex << i;
    ASSERT_EQ(float_bits(hb16[i]), float_bits(cb16)) << "bf16 0x" << std::hex << i;
  }
  cudaFree(d16);
  cudaFree(db16);
}

TEST(ConvertGpu, EncodeMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(99);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> in(1 << 20);
  for (float& f : in) f = bits_float(bits(rng));
  const int n = static_cast<int>(in.size());
  float* din = nullptr;
  uint16_t *d16 = nullptr, *db16 = nullptr;
  ASSERT_CUDA(cudaMalloc(&din, n * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&d16, n * sizeof(uint16_t)));
  ASSERT_CUDA(cudaMalloc(&db16, n * sizeof(uint16_t)));
  ASSERT_CUDA(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  encode_all<<<256, 256>>>(din, d16, db16, n);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<uint16_t> h16(n), hb16(n);
  ASSERT_CUDA(cudaMemcpy(h16.data(), d16, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(hb16.data(), db16, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(h16[i], f32_to_f16(in[i])) << "fp16 of " << in[i];
    ASSERT_EQ(hb16[i], f32_to_bf16(in[i])) << "bf16 of " << in[i];
  }
  cudaFree(din);
  cudaFree(d16);
  cudaFree(db16);
}

}  // namespace
}  // namespace zdp::kernels
