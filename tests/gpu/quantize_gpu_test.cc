// The CUDA quantization kernels (kernels/quantize.h) give the CPU path's bits: the codes,
// the scales and the error feedback of the quantizer, the dequantized sum and the
// dequantized parameters, for int8 and int4, odd sizes, and non-finite blocks. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/quantize.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::DeviceArray;
using zdp::testing::GpuFixture;
using zdp::testing::TestRandom;

void expect_same_bytes(const std::vector<char>& cpu, const std::vector<char>& gpu, const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_EQ(cpu[i], gpu[i]) << what << ": mismatch at byte " << i;
}

// Bit for bit, except that a NaN matches any NaN: arithmetic on a NaN gives the operand's
// payload on x86 (0x7fc00000 here) and the canonical 0x7fffffff on a GPU (seen on an
// H200), and only NaN-ness carries meaning (the step is skipped).
void expect_same_floats(const std::vector<float>& cpu, const std::vector<float>& gpu, const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(cpu[i]) || std::isnan(gpu[i])) {
      ASSERT_TRUE(std::isnan(cpu[i]) && std::isnan(gpu[i])) << what << ": index " << i << " (" << cpu[i] << " vs " << gpu[i] << ")";
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &cpu[i], 4);
    std::memcpy(&b, &gpu[i], 4);
    ASSERT_EQ(a, b) << what << ": mismatch at index " << i << " (" << cpu[i] << " vs " << gpu[i] << ")";
  }
}

bool bf16_nan(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0; }

TEST(QuantizeGpu, QuantizeWithErrorFeedbackMatchesCpu) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  for (int bits : {8, 4}) {
    for (int64_t n : {int64_t{1}, int64_t{257}, int64_t{(1 << 20) + 13}}) {
      std::vector<float> in = rnd.signed_vector(n, 1e-4f, 1.0f), err = rnd.signed_vector(n, 1e-6f, 1e-3f);
      if (n > 1000) in[700] = std::numeric_limits<float>::infinity();  // one poisoned block
      const int64_t bytes = quant_chunk_bytes(n, bits);
      std::vector<char> wire_cpu(static_cast<size_t>(bytes), 0);
      std::vector<float> err_cpu = err;
      ASSERT_TRUE(quantize_cpu(QuantizeArgs{in.data(), DType::kF32, err_cpu.data(), n, bits, wire_cpu.data()}).ok());
      DeviceArray<float> din(*gpu.device, in), derr(*gpu.device, err);
      DeviceArray<char> dwire(*gpu.device, std::vector<char>(static_cast<size_t>(bytes), 0));
      ASSERT_TRUE(
          quantize_cuda(QuantizeArgs{din.data(), DType::kF32, derr.data(), n, bits, dwire.data()}, gpu.cuda_stream()).ok());
      gpu.sync();
      expect_same_bytes(wire_cpu, dwire.download(), "wire");
      expect_same_floats(err_cpu, derr.download(), "error feedback");

      // The receiver's sum of 3 chunks (this one three times, the middle one skipped) onto an own slice.
      std::vector<char> three;
      for (int c = 0; c < 3; ++c) three.insert(three.end(), wire_cpu.begin(), wire_cpu.end());
      std::vector<float> own = rnd.signed_vector(n, 1e-3f, 1.0f), out_cpu = rnd.signed_vector(n, 1e-3f, 1.0f);
      DeviceArray<char> dthree(*gpu.device, three);
      DeviceArray<float> down(*gpu.device, own), dout(*gpu.device, out_cpu);
      ASSERT_TRUE(dequant_sum_cpu(DequantSumArgs{three.data(), bytes, 3, 1, own.data(), out_cpu.data(), true, n, bits}).ok());
      ASSERT_TRUE(dequant_sum_cuda(DequantSumArgs{dthree.data(), bytes, 3, 1, down.data(), dout.data(), true, n, bits},
                                   gpu.cuda_stream())
                      .ok());
      // The parameters' dequantization into bf16.
      std::vector<Bf16> par_cpu(static_cast<size_t>(3 * n));
      DeviceArray<Bf16> dpar(*gpu.device, par_cpu);
      ASSERT_TRUE(dequantize_cpu(DequantizeArgs{three.data(), bytes, 3, n, bits, par_cpu.data(), DType::kBF16}).ok());
      ASSERT_TRUE(dequantize_cuda(DequantizeArgs{dthree.data(), bytes, 3, n, bits, dpar.data(), DType::kBF16},
                                  gpu.cuda_stream())
                      .ok());
      gpu.sync();
      expect_same_floats(out_cpu, dout.download(), "dequantized sum");
      const std::vector<Bf16> par_gpu = dpar.download();
      for (size_t i = 0; i < par_cpu.size(); ++i) {
        if (bf16_nan(par_cpu[i].bits) && bf16_nan(par_gpu[i].bits)) continue;  // as expect_same_floats
        ASSERT_EQ(par_cpu[i].bits, par_gpu[i].bits) << "parameter " << i;
      }
    }
  }
}

TEST(QuantizeGpu, Bf16InputMatchesCpu) {
  ZDP_SKIP_WITHOUT_GPU();
  GpuFixture gpu;
  ASSERT_TRUE(gpu.init());
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t n = 100003;
  std::vector<Bf16> in = zdp::testing::encode<Bf16>(rnd.signed_vector(n, 1e-4f, 3.0f));
  const int64_t bytes = quant_chunk_bytes(n, 8);
  std::vector<char> wire_cpu(static_cast<size_t>(bytes), 0);
  ASSERT_TRUE(quantize_cpu(QuantizeArgs{in.data(), DType::kBF16, nullptr, n, 8, wire_cpu.data()}).ok());
  DeviceArray<Bf16> din(*gpu.device, in);
  DeviceArray<char> dwire(*gpu.device, std::vector<char>(static_cast<size_t>(bytes), 0));
  ASSERT_TRUE(quantize_cuda(QuantizeArgs{din.data(), DType::kBF16, nullptr, n, 8, dwire.data()}, gpu.cuda_stream()).ok());
  gpu.sync();
  expect_same_bytes(wire_cpu, dwire.download(), "wire");
}

}  // namespace
}  // namespace zdp::kernels
