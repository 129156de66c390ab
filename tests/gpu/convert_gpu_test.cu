// The fp16/bf16 conversions of kernels/convert.h on the GPU give the very bits the CPU
// gives, for every 16-bit encoding and for a sweep of fp32 values (the CPU path is
// checked against a float64 reference in tests/unit/convert_test.cc); so does the
// hardware rounding of the layer kernels' bf16 stores (kernels/cuda/nn_common.cuh), but
// for a NaN's payload.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cuda/nn_common.cuh"
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

// Eight floats a thread through the layer kernels' 16-byte bf16 store (cvt.rn.bf16x2.f32).
__global__ void store_bf16x8(const float* in, Bf16* out, int groups) {
  for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += gridDim.x * blockDim.x) {
    float v[8];
    for (int k = 0; k < 8; ++k) v[k] = in[8 * g + k];
    cuda::store_n<8>(out + 8 * g, v);
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

// The hardware rounding gives f32_to_bf16's bits for every non-NaN input: random bit
// patterns (subnormals, infinities and huge values among them), ties on both sides of
// even, values that round up to infinity, and the smallest subnormals. A NaN stays a NaN.
TEST(ConvertGpu, HardwareBf16StoreMatchesCpuButForNanPayloads) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> in(1 << 20);
  for (float& f : in) f = bits_float(bits(rng));
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00000001u,
                              0x00008000u, 0x00018000u, 0x80000001u, 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                              0x7fc00001u, 0xffffffffu};
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); ++i) in[i] = bits_float(special[i]);
  const int n = static_cast<int>(in.size());
  float* din = nullptr;
  Bf16* dout = nullptr;
  ASSERT_CUDA(cudaMalloc(&din, n * sizeof(float)));
  ASSERT_CUDA(cudaMalloc(&dout, n * sizeof(Bf16)));
  ASSERT_CUDA(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  store_bf16x8<<<256, 256>>>(din, dout, n / 8);
  ASSERT_CUDA(cudaGetLastError());
  std::vector<Bf16> out(n);
  ASSERT_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(Bf16), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const uint32_t u = float_bits(in[i]);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      ASSERT_TRUE((out[i].bits & 0x7f80u) == 0x7f80u && (out[i].bits & 0x007fu) != 0) << "NaN 0x" << std::hex << u;
    } else {
      ASSERT_EQ(out[i].bits, f32_to_bf16(in[i])) << "bf16 of 0x" << std::hex << u << " (element " << std::dec << i << ")";
    }
  }
  cudaFree(din);
  cudaFree(dout);
}

}  // namespace
}  // namespace zdp::kernels
