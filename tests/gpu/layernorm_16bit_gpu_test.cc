// LayerNorm in 16 bits as the gpt runs it, GPU against the CPU twin: the forward without
// the fused residual (ln1 and the final norm), and the backward that adds dx to the
// residual stream's gradient (OutputMode::kAccumulate, every block's), in bf16 and fp16.
// layer_kernels_gpu_test covers both in fp32 only, and 16-bit rows only with the residual
// (a review of the kernels' tests found the gap). Bounds as there: the row statistics
// differ by summation order (straight_line_bound of testing/tolerance.h), then each
// 16-bit result by its rounding (`unit` relative, on either side).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/layernorm.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using testing::DeviceArray;
using testing::unwritten_like;

class LayerNorm16BitGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    ASSERT_TRUE(gpu_.init());
  }

  // One dtype and width: x in [-2, 2], weight in [-1, 1], bias half the weight, dy and the
  // prior gradient in [-1, 1], each rounded to T.
  template <typename T>
  void check(DType dtype, double unit, int64_t cols) {
    SCOPED_TRACE(std::string(to_string(dtype)) + ", cols " + std::to_string(cols) + ", " + rng_.trace());
    const int64_t rows = 200;
    auto vec = [&](size_t n, float scale) { return testing::encode<T>(rng_.signed_vector(n, 0.0f, scale)); };
    const std::vector<T> x = vec(rows * cols, 2), w = vec(cols, 1), dy = vec(rows * cols, 1), prior = vec(rows * cols, 1);
    std::vector<T> b(w.size());
    for (size_t i = 0; i < w.size(); ++i) b[i] = from_f32<T>(0.5f * to_f32(w[i]));

    std::vector<T> y(x.size()), dx = prior, dw(w.size()), db(w.size());
    std::vector<float> mean(rows), rstd(rows);
    ASSERT_TRUE(layernorm_forward_cpu({rows, cols, dtype, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data()}).ok());
    ASSERT_TRUE(layernorm_backward_cpu({rows, cols, dtype, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                                        OutputMode::kAccumulate, dw.data(), db.data()}).ok());

    DeviceArray<T> gx(*gpu_.device, x), gw(*gpu_.device, w), gb(*gpu_.device, b), gdy(*gpu_.device, dy),
        gdx(*gpu_.device, prior), gy(*gpu_.device, unwritten_like(y)), gdw(*gpu_.device, unwritten_like(dw)),
        gdb(*gpu_.device, unwritten_like(db));
    DeviceArray<float> gmean(*gpu_.device, unwritten_like(mean)), grstd(*gpu_.device, unwritten_like(rstd));
    DeviceArray<float> cpu_mean(*gpu_.device, mean), cpu_rstd(*gpu_.device, rstd);
    DeviceArray<float> partials(*gpu_.device, std::vector<float>(static_cast<size_t>(layernorm_partials_floats(rows, cols))));
    ASSERT_TRUE(layernorm_forward_cuda({rows, cols, dtype, gx.data(), gw.data(), gb.data(), gy.data(), gmean.data(), grstd.data()},
                                       gpu_.cuda_stream()).ok());
    // The backward gets the CPU's statistics: dweight and dbias are then the same sums in
    // the same order on both (bit for bit), and dx differs by its row means' order only.
    ASSERT_TRUE(layernorm_backward_cuda({rows, cols, dtype, gdy.data(), gx.data(), gw.data(), cpu_mean.data(),
                                         cpu_rstd.data(), gdx.data(), OutputMode::kAccumulate, gdw.data(), gdb.data(),
                                         partials.data()},
                                        gpu_.cuda_stream()).ok());
    gpu_.sync();

    const double mean_bound = testing::straight_line_bound(cols, 2.0 * cols) / cols;
    const double rstd_bound = testing::straight_line_bound(2 * cols, 16.0 * cols) / cols;
    const std::vector<float> got_mean = gmean.download(), got_rstd = grstd.download();
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(testing::within(got_mean[r], mean[r], mean_bound, r)) << "mean";
      ASSERT_TRUE(testing::within(got_rstd[r], rstd[r], rstd_bound, r)) << "rstd";
    }
    // |y| <= ~4: the plain forward's bound, plus a rounding to T on either side.
    const double y_bound = 2 * unit * 4 + mean_bound + 4.0 * rstd_bound + testing::straight_line_bound(4, 5.0);
    const std::vector<T> got_y = gy.download();
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(testing::within(to_f32(got_y[i]), to_f32(y[i]), y_bound, static_cast<int64_t>(i))) << "y";
    }
    // dx's row means are sums of |dy w| <= 1 and |dy w xhat| <= 3 (xhat <= 3 scales the
    // second); the sum with the prior, |.| <= ~12, rounds to T on either side.
    const double dx_bound = testing::straight_line_bound(cols, 1.0 * cols) / cols +
                            3.0 * testing::straight_line_bound(cols, 3.0 * cols) / cols +
                            testing::straight_line_bound(7, 5.0) + 2 * unit * 12;
    const std::vector<T> got_dx = gdx.download();
    for (size_t i = 0; i < dx.size(); ++i) {
      ASSERT_TRUE(testing::within(to_f32(got_dx[i]), to_f32(dx[i]), dx_bound, static_cast<int64_t>(i))) << "dx accumulated";
    }
    EXPECT_TRUE(testing::bitwise_equal(gdw.download(), dw, "dweight"));
    EXPECT_TRUE(testing::bitwise_equal(gdb.download(), db, "dbias"));
  }

  testing::GpuFixture gpu_;
  testing::TestRandom rng_;
};

// 768 (gpt2-124m), 264 and 1000 (the vector path in 2 and 4 register chunks), 2048
// (vector, not in registers) and 100 (scalar).
TEST_F(LayerNorm16BitGpu, ForwardWithoutTheResidualAndBackwardIntoTheResidualGradient) {
  for (const int64_t cols : {int64_t{768}, int64_t{264}, int64_t{1000}, int64_t{2048}, int64_t{100}}) {
    check<Bf16>(DType::kBF16, 0x1p-8, cols);
    check<Half>(DType::kF16, 0x1p-11, cols);
  }
}

}  // namespace
}  // namespace zdp::kernels
