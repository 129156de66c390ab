// kernels/bias_grad.h on the GPU gives its CPU twin's bits: fp32, bf16 and fp16, the
// 16-byte path (columns a multiple of 8) and the scalar one, one chunk and many (a
// partial last chunk), a db at an odd element offset (a bias in the engine's layout), and
// GPT-2's shapes. db starts from a sentinel, so a column the kernel never writes fails.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/bias_grad.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"

namespace zdp::kernels {
namespace {

using zdp::testing::DeviceArray;
using zdp::testing::dtype_of;
using zdp::testing::encode;
using zdp::testing::GpuFixture;
using zdp::testing::raw_bits;
using zdp::testing::TestRandom;
using zdp::testing::unwritten;

template <typename T>
void bias_grad_case(GpuFixture& gpu, TestRandom& rnd, int64_t rows, int64_t cols, int64_t db_offset) {
  SCOPED_TRACE(std::string(to_string(dtype_of<T>())) + " " + std::to_string(rows) + " x " + std::to_string(cols) +
               ", db at element " + std::to_string(db_offset));
  const std::vector<T> dy = encode<T>(rnd.signed_vector(static_cast<size_t>(rows * cols), 1e-3f, 4.0f));
  std::vector<T> cpu = unwritten<T>(static_cast<size_t>(cols));
  ASSERT_TRUE(bias_grad_cpu({rows, cols, dtype_of<T>(), dy.data(), cpu.data(), nullptr}).ok());
  DeviceArray<T> ddy(*gpu.device, dy);
  DeviceArray<T> ddb(*gpu.device, unwritten<T>(static_cast<size_t>(cols + db_offset)));
  const int64_t floats = bias_grad_partials_floats(rows, cols);
  DeviceArray<float> partials(*gpu.device, unwritten<float>(static_cast<size_t>(floats > 0 ? floats : 1)));
  ASSERT_TRUE(bias_grad_cuda({rows, cols, dtype_of<T>(), ddy.data(), ddb.data() + db_offset, partials.data()},
                             gpu.cuda_stream())
                  .ok());
  gpu.sync();
  const std::vector<T> got = ddb.download();
  const std::vector<T> before = unwritten<T>(static_cast<size_t>(db_offset));
  EXPECT_EQ(raw_bits(std::vector<T>(got.begin(), got.begin() + db_offset)), raw_bits(before)) << "wrote before db";
  for (int64_t c = 0; c < cols; ++c) {
    const T g = got[static_cast<size_t>(db_offset + c)], w = cpu[static_cast<size_t>(c)];
    ASSERT_EQ(std::memcmp(&g, &w, sizeof(T)), 0) << "column " << c << ": gpu " << to_f32(g) << ", cpu " << to_f32(w);
  }
}

class BiasGradGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    ASSERT_TRUE(gpu_.init());
  }
  GpuFixture gpu_;
  TestRandom rnd_;
};

TEST_F(BiasGradGpu, SmallAndOddShapesAreBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {128, 16}, {300, 8}, {1000, 257},
                                   {4097, 264}}) {
    bias_grad_case<float>(gpu_, rnd_, rows, cols, 0);
    bias_grad_case<Bf16>(gpu_, rnd_, rows, cols, 0);
    bias_grad_case<Half>(gpu_, rnd_, rows, cols, 1);
  }
}

TEST_F(BiasGradGpu, Gpt2ShapesAreBitIdentical) {
  SCOPED_TRACE(rnd_.trace());
  // micro-batch 16 x seq 1024 tokens: fc (3072), qkv (2304), attn proj and fc proj (768).
  for (const int64_t cols : {int64_t{3072}, int64_t{2304}, int64_t{768}}) {
    bias_grad_case<Bf16>(gpu_, rnd_, 16384, cols, 3);
  }
  bias_grad_case<float>(gpu_, rnd_, 16384, 768, 0);
}

}  // namespace
}  // namespace zdp::kernels
