// The model-layer kernels on the GPU against their CPU twins (same per-element math from
// the kernels/*.h headers). Element-wise kernels and sums taken in the same order
// (residual add, GELU, squared error, embedding forward and backward) must match bit for
// bit; kernels whose row/column sums are split over a warp or block (layernorm, softmax,
// cross-entropy) differ only by summation order: within straight_line_bound(n, sum of
// |terms|) of testing/tolerance.h, n the length of the sum.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/attention_softmax.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using testing::DeviceArray;
using testing::unwritten;
using testing::unwritten_like;

std::vector<float> random(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double allowed, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) ASSERT_TRUE(testing::within(gpu[i], cpu[i], allowed, static_cast<int64_t>(i))) << what;
}

// The cross-entropy's logits here are uniform in [-8, 8]: the shifted ones x = logit -
// max lie in [-16, 0]. Each exponential differs between the devices by at most this much
// of its value: the GPU's exp_sfu within (2.5 + 1.25 |x|) ulp, the CPU's exp_branchless
// within 2, an ulp at most 2^-23 of the value.
constexpr double kCrossEntropyMaxShift = 16.0;
constexpr double kExpRelative = (2.5 + 1.25 * kCrossEntropyMaxShift + 2) * 0x1p-23;

// loss = log(sum) + max - logit[target]: the sum of `vocab` terms each <= 1 after the
// shift (>= 1 in all) in another order, and of exponentials kExpRelative apart, moves
// log(sum) by its relative error, then a few roundings of the O(20) result.
void expect_cross_entropy_losses(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab,
                                 const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    const double expected = want[r];
    const double allowed =
        testing::straight_line_bound(vocab, 1.0) + kExpRelative + testing::straight_line_bound(4, std::fabs(expected));
    ASSERT_TRUE(testing::within(got[r], expected, allowed, static_cast<int64_t>(r))) << what;
  }
}

class LayerKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_SKIP_WITHOUT_GPU();
    ASSERT_TRUE(gpu_.init());
  }
  testing::GpuFixture gpu_;
};

TEST_F(LayerKernelsGpu, AddAndGeluAreBitIdentical) {
  const size_t n = 100003;  // not a multiple of any block
  const std::vector<float> a = random(n, 4, 1), b = random(n, 4, 2);
  std::vector<float> add(n), y(n), dx(n);
  ASSERT_TRUE(add_cpu({static_cast<int64_t>(n), DType::kF32, a.data(), b.data(), add.data()}).ok());
  ASSERT_TRUE(gelu_forward_cpu({static_cast<int64_t>(n), DType::kF32, a.data(), nullptr, y.data()}).ok());
  ASSERT_TRUE(gelu_backward_cpu({static_cast<int64_t>(n), DType::kF32, a.data(), b.data(), dx.data()}).ok());
  DeviceArray<float> da(*gpu_.device, a), db(*gpu_.device, b), o1(*gpu_.device, unwritten<float>(n)),
      o2(*gpu_.device, unwritten<float>(n)), o3(*gpu_.device, unwritten<float>(n));
  ASSERT_TRUE(add_cuda({static_cast<int64_t>(n), DType::kF32, da.data(), db.data(), o1.data()}, gpu_.cuda_stream()).ok());
  ASSERT_TRUE(gelu_forward_cuda({static_cast<int64_t>(n), DType::kF32, da.data(), nullptr, o2.data()}, gpu_.cuda_stream()).ok());
  ASSERT_TRUE(gelu_backward_cuda({static_cast<int64_t>(n), DType::kF32, da.data(), db.data(), o3.data()}, gpu_.cuda_stream()).ok());
  gpu_.sync();
  EXPECT_TRUE(testing::bitwise_equal(o1.download(), add, "add"));
  EXPECT_TRUE(testing::bitwise_equal(o2.download(), y, "gelu"));
  EXPECT_TRUE(testing::bitwise_equal(o3.download(), dx, "gelu_backward"));
}

// The 16-byte vector path (aligned pointers: 8 elements per iteration, then the tail)
// and the scalar path (pointers one element off) give the CPU's bits, in bf16 and fp16
// (fp16's loads and stores ran on a GPU only inside gpt_gpu_test's 16-bit case before).
TEST_F(LayerKernelsGpu, VectorisedAddAndGeluMatchTheCpuAlignedOrNot) {
  const int64_t n = 4099;  // 512 groups of 8 and a tail of 3
  const std::vector<float> af = random(static_cast<size_t>(n + 1), 4, 30), bf = random(static_cast<size_t>(n + 1), 4, 31);
  auto check = [&](auto zero, DType dtype, const char* name) {
    using T = decltype(zero);
    std::vector<T> a(af.size()), b(bf.size());
    for (size_t i = 0; i < af.size(); ++i) a[i] = from_f32<T>(af[i]), b[i] = from_f32<T>(bf[i]);
    for (const int64_t off : {int64_t{0}, int64_t{1}}) {
      std::vector<T> add(static_cast<size_t>(n)), y(add.size()), dx(add.size());
      ASSERT_TRUE(add_cpu({n, dtype, a.data() + off, b.data() + off, add.data()}).ok());
      ASSERT_TRUE(gelu_forward_cpu({n, dtype, a.data() + off, nullptr, y.data()}).ok());
      ASSERT_TRUE(gelu_backward_cpu({n, dtype, a.data() + off, b.data() + off, dx.data()}).ok());
      DeviceArray<T> da(*gpu_.device, a), db(*gpu_.device, b), o1(*gpu_.device, unwritten_like(a)),
          o2(*gpu_.device, unwritten_like(a)), o3(*gpu_.device, unwritten_like(a));
      ASSERT_TRUE(add_cuda({n, dtype, da.data() + off, db.data() + off, o1.data() + off}, gpu_.cuda_stream()).ok());
      ASSERT_TRUE(gelu_forward_cuda({n, dtype, da.data() + off, nullptr, o2.data() + off}, gpu_.cuda_stream()).ok());
      ASSERT_TRUE(
          gelu_backward_cuda({n, dtype, da.data() + off, db.data() + off, o3.data() + off}, gpu_.cuda_stream()).ok());
      gpu_.sync();
      auto part = [&](const DeviceArray<T>& d) {
        const std::vector<T> all = d.download();
        return std::vector<T>(all.begin() + off, all.begin() + off + n);
      };
      EXPECT_TRUE(testing::bitwise_equal(part(o1), add, std::string(name) + " add")) << "offset " << off;
      EXPECT_TRUE(testing::bitwise_equal(part(o2), y, std::string(name) + " gelu")) << "offset " << off;
      EXPECT_TRUE(testing::bitwise_equal(part(o3), dx, std::string(name) + " gelu_backward")) << "offset " << off;
    }
  };
  check(Bf16{}, DType::kBF16, "bf16");
  check(Half{}, DType::kF16, "fp16");
}

// The 16-byte vector path (8 elements a lane and step) with the row in registers: cols
// 768 (3 chunks of 256), 264 (2, the second partial), 1000 (4); 2048 without registers
// (more chunks than slots); 100: the scalar path.
TEST_F(LayerKernelsGpu, LayerNormForwardAndBackward) {
  for (const int64_t cols : {int64_t{768}, int64_t{264}, int64_t{1000}, int64_t{2048}, int64_t{100}}) {
    SCOPED_TRACE(cols);
    const int64_t rows = 300;
    const std::vector<float> x = random(rows * cols, 2, 3), w = random(cols, 1, 4), b = random(cols, 1, 5),
                             dy = random(rows * cols, 1, 6);
    std::vector<float> y(x.size()), mean(rows), rstd(rows), dx(x.size()), dw(cols), dbias(cols);
    ASSERT_TRUE(layernorm_forward_cpu({rows, cols, DType::kF32, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data()}).ok());
    ASSERT_TRUE(layernorm_backward_cpu({rows, cols, DType::kF32, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                                        OutputMode::kOverwrite, dw.data(), dbias.data()}).ok());
    // The forward's row statistics differ from the CPU's by summation order (a warp's tree
    // vs a sequential sum): they are compared within the bound, and the backward gets the
    // CPU's mean and rstd, so that dweight and dbias (each column's rows summed in
    // kernels/common.h's order on both devices: 8 lanes of rows in each chunk of 128, then
    // the 3 chunks, with the same xhat) must be equal bit for bit.
    DeviceArray<float> gx(*gpu_.device, x), gw(*gpu_.device, w), gb(*gpu_.device, b), gdy(*gpu_.device, dy);
    DeviceArray<float> gy(*gpu_.device, unwritten_like(y)), gmean(*gpu_.device, unwritten_like(mean)),
        grstd(*gpu_.device, unwritten_like(rstd)), gdx(*gpu_.device, unwritten_like(dx)), gdw(*gpu_.device, unwritten_like(dw)),
        gdb(*gpu_.device, unwritten_like(dbias));
    DeviceArray<float> cpu_mean(*gpu_.device, mean), cpu_rstd(*gpu_.device, rstd);
    DeviceArray<float> partials(*gpu_.device, std::vector<float>(static_cast<size_t>(layernorm_partials_floats(rows, cols))));
    ASSERT_TRUE(layernorm_forward_cuda({rows, cols, DType::kF32, gx.data(), gw.data(), gb.data(), gy.data(), gmean.data(), grstd.data()},
                                       gpu_.cuda_stream()).ok());
    ASSERT_TRUE(layernorm_backward_cuda({rows, cols, DType::kF32, gdy.data(), gx.data(), gw.data(), cpu_mean.data(),
                                         cpu_rstd.data(), gdx.data(), OutputMode::kOverwrite, gdw.data(), gdb.data(),
                                         partials.data()},
                                        gpu_.cuda_stream()).ok());
    gpu_.sync();
    // xhat is O(3) for these inputs; the row statistics are sums of `cols` terms of
    // magnitude <= 2 (the mean's: x in [-2, 2]) and of their squares <= 16 (the variance's),
    // over cols; rstd = 1/sqrt(var) with var ~ 4/3 moves by less than var does. Per element
    // y = (x - mean) rstd w + b with |x - mean| <= 4, |w|, rstd <= 1: the statistics' errors
    // (mean's once, rstd's 4 times) and y's own few roundings. dx's two row means are sums
    // of |dy w| <= 1 and |dy w xhat| <= 3, over cols; xhat <= 3 scales the second.
    const double mean_bound = testing::straight_line_bound(cols, 2.0 * cols) / cols;
    const double rstd_bound = testing::straight_line_bound(2 * cols, 16.0 * cols) / cols;
    expect_close(gmean.download(), mean, mean_bound, "mean");
    expect_close(grstd.download(), rstd, rstd_bound, "rstd");
    expect_close(gy.download(), y, mean_bound + 4.0 * rstd_bound + testing::straight_line_bound(4, 5.0), "y");
    const double dx_bound = testing::straight_line_bound(cols, 1.0 * cols) / cols +
                            3.0 * testing::straight_line_bound(cols, 3.0 * cols) / cols + testing::straight_line_bound(6, 4.0);
    expect_close(gdx.download(), dx, dx_bound, "dx");
    EXPECT_TRUE(testing::bitwise_equal(gdw.download(), dw, "dweight (rows summed in order on both, the CPU's statistics)"));
    EXPECT_TRUE(testing::bitwise_equal(gdb.download(), dbias, "dbias"));
    // dx added to what the buffer held (the residual stream's gradient): the same dx, then
    // one rounding of the sum with a prior in [-1, 1].
    const std::vector<float> prior = random(rows * cols, 1, 7);
    std::vector<float> acc = prior;
    ASSERT_TRUE(layernorm_backward_cpu({rows, cols, DType::kF32, dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                                        acc.data(), OutputMode::kAccumulate, dw.data(), dbias.data()}).ok());
    DeviceArray<float> gacc(*gpu_.device, prior);
    ASSERT_TRUE(layernorm_backward_cuda({rows, cols, DType::kF32, gdy.data(), gx.data(), gw.data(), cpu_mean.data(),
                                         cpu_rstd.data(), gacc.data(), OutputMode::kAccumulate, gdw.data(), gdb.data(),
                                         partials.data()},
                                        gpu_.cuda_stream()).ok());
    gpu_.sync();
    expect_close(gacc.download(), acc, dx_bound + testing::straight_line_bound(1, 5.0), "dx accumulated");
  }
}

// The fused residual add + LayerNorm (GPT's x_mid += x_in, then ln2; in place): the sum
// bit for bit the CPU's (the add's per-element math), the statistics and y within the
// bounds of the plain forward above; bf16 rows of 768, 264 and 1000 (vector path, in
// 3, 2 and 4 register chunks), 2048 (vector, not) and 100 (scalar).
TEST_F(LayerKernelsGpu, ResidualAddFusedIntoLayerNorm) {
  // In bf16 and in fp16, whose 16-byte loads and stores are the same path with another type.
  auto check = [&](auto zero, DType dtype, double unit, int64_t cols) {
    using T = decltype(zero);
    SCOPED_TRACE(std::string(to_string(dtype)) + ", cols " + std::to_string(cols));
    const int64_t rows = 300;
    const std::vector<float> xf = random(rows * cols, 1, 40), rf = random(rows * cols, 1, 41), wf = random(cols, 1, 42);
    std::vector<T> x(xf.size()), r(rf.size()), w(wf.size()), b(wf.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = from_f32<T>(xf[i]), r[i] = from_f32<T>(rf[i]);
    for (size_t i = 0; i < w.size(); ++i) w[i] = from_f32<T>(wf[i]), b[i] = from_f32<T>(0.5f * wf[i]);
    std::vector<T> sum = x, y(x.size());
    std::vector<float> mean(rows), rstd(rows);
    ASSERT_TRUE(layernorm_forward_cpu({rows, cols, dtype, sum.data(), w.data(), b.data(), y.data(), mean.data(),
                                       rstd.data(), 1e-5f, r.data(), sum.data()}).ok());
    DeviceArray<T> gx(*gpu_.device, x), gr(*gpu_.device, r), gw(*gpu_.device, w), gb(*gpu_.device, b),
        gy(*gpu_.device, unwritten_like(y));
    DeviceArray<float> gmean(*gpu_.device, unwritten_like(mean)), grstd(*gpu_.device, unwritten_like(rstd));
    ASSERT_TRUE(layernorm_forward_cuda({rows, cols, dtype, gx.data(), gw.data(), gb.data(), gy.data(), gmean.data(),
                                        grstd.data(), 1e-5f, gr.data(), gx.data()}, gpu_.cuda_stream()).ok());
    gpu_.sync();
    EXPECT_TRUE(testing::bitwise_equal(gx.download(), sum, "x + residual"));
    // |sum| <= 2: the mean's terms up to 2, the variance's (x - mean)^2 up to 16 (rstd
    // O(1)), as the plain forward's bounds above; y is then the plain forward's bound plus
    // its rounding to the 16-bit type (`unit` relative, |y| <= ~4, on either side). The y
    // bound was the mean's sum bound without its / cols: 1.03 at cols 2048 for |y| <= ~3,
    // which passed a kernel that dropped the bias.
    const double mean_bound = testing::straight_line_bound(cols, 2.0 * cols) / cols;
    const double rstd_bound = testing::straight_line_bound(2 * cols, 16.0 * cols) / cols;
    expect_close(gmean.download(), mean, mean_bound, "mean");
    expect_close(grstd.download(), rstd, rstd_bound, "rstd");
    const double y_bound = 2 * unit * 4 + mean_bound + 4.0 * rstd_bound + testing::straight_line_bound(4, 5.0);
    const std::vector<T> got = gy.download();
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(testing::within(to_f32(got[i]), to_f32(y[i]), y_bound, static_cast<int64_t>(i))) << "y";
    }
  };
  for (const int64_t cols : {int64_t{768}, int64_t{264}, int64_t{1000}, int64_t{2048}, int64_t{100}}) {
    check(Bf16{}, DType::kBF16, 0x1p-8, cols);
    check(Half{}, DType::kF16, 0x1p-11, cols);
  }
}

// The two-pass dweight/dbias at gpt2-124m's height (16,384 rows: 128 chunks, 384 blocks),
// in bf16, and at a height that is not a multiple of the chunk; a single chunk writes the
// result directly. Same order on both devices, same statistics: bit for bit.
TEST_F(LayerKernelsGpu, LayerNormWeightGradientsInChunksAreBitIdentical) {
  for (const int64_t rows : {int64_t{16384}, int64_t{1000}, int64_t{128}, int64_t{1}}) {
    const int64_t cols = 768;
    const std::vector<float> xf = random(rows * cols, 2, 20), dyf = random(rows * cols, 1, 21), w = random(cols, 1, 22);
    std::vector<Bf16> x(xf.size()), dy(dyf.size()), wb(w.size());
    for (size_t i = 0; i < xf.size(); ++i) x[i] = from_f32<Bf16>(xf[i]), dy[i] = from_f32<Bf16>(dyf[i]);
    for (size_t i = 0; i < w.size(); ++i) wb[i] = from_f32<Bf16>(w[i]);
    std::vector<float> mean(rows), rstd(rows);
    for (int64_t r = 0; r < rows; ++r) mean[r] = 0.01f * static_cast<float>(r % 7), rstd[r] = 1.0f + 0.001f * static_cast<float>(r % 13);
    std::vector<Bf16> dx(x.size()), dw(cols), db(cols);
    ASSERT_TRUE(layernorm_backward_cpu({rows, cols, DType::kBF16, dy.data(), x.data(), wb.data(), mean.data(), rstd.data(),
                                        dx.data(), OutputMode::kOverwrite, dw.data(), db.data()}).ok());
    DeviceArray<Bf16> gx(*gpu_.device, x), gdy(*gpu_.device, dy), gw(*gpu_.device, wb), gdx(*gpu_.device, unwritten_like(dx)),
        gdw(*gpu_.device, unwritten_like(dw)), gdb(*gpu_.device, unwritten_like(db));
    DeviceArray<float> gmean(*gpu_.device, mean), grstd(*gpu_.device, rstd);
    DeviceArray<float> partials(*gpu_.device, std::vector<float>(static_cast<size_t>(layernorm_partials_floats(rows, cols)) + 1));
    ASSERT_TRUE(layernorm_backward_cuda({rows, cols, DType::kBF16, gdy.data(), gx.data(), gw.data(), gmean.data(),
                                         grstd.data(), gdx.data(), OutputMode::kOverwrite, gdw.data(), gdb.data(),
                                         partials.data()}, gpu_.cuda_stream()).ok()) << rows;
    gpu_.sync();
    EXPECT_TRUE(testing::bitwise_equal(gdw.download(), dw, "bf16 dweight")) << rows << " rows";
    EXPECT_TRUE(testing::bitwise_equal(gdb.download(), db, "bf16 dbias")) << rows << " rows";
    // dx: the same statistics, row means of 768 terms |dy w| <= 1 and |dy w xhat| <= ~2.2
    // summed in another order (xhat <= ~2.2 scales the second), then bf16's rounding of
    // values that may straddle a rounding boundary: one bf16 ulp, 2^-7 of the value.
    const std::vector<Bf16> got_dx = gdx.download();
    const double sum_bound = testing::straight_line_bound(cols, 1.0 * cols) / cols +
                             2.2 * testing::straight_line_bound(cols, 2.2 * cols) / cols;
    for (size_t i = 0; i < dx.size(); ++i) {
      const double expected = to_f32(dx[i]);
      ASSERT_TRUE(testing::within(to_f32(got_dx[i]), expected, 0x1p-7 * std::fabs(expected) + sum_bound,
                                  static_cast<int64_t>(i))) << "bf16 dx, " << rows << " rows";
    }
  }
  // More than one chunk and no scratch: refused before anything is enqueued.
  LayerNormBackwardArgs a{300, 8, DType::kF32};
  float dummy[8] = {};
  a.dy = a.x = a.weight = dummy, a.mean = a.rstd = dummy, a.dx = a.dweight = a.dbias = dummy;
  EXPECT_EQ(layernorm_backward_cuda(a, gpu_.cuda_stream()).code(), StatusCode::kInvalidArgument);
}

// Softmax rows of 100 scores take the scalar path, of 96 the 16-byte one (masked past
// the query); 5 heads leave a partial last block of rows. Forward and backward run in
// place, as the trainer runs them (probs over scores, dscores over dprobs), and out of
// place into never-written buffers. The vocabulary of 50304 takes the shared-memory path
// of the cross-entropy, 60,000 (fp32 rows of 240,000 bytes, past a block's 227 KiB) the
// plain 16-byte one, untested in fp32 before (gpt_gpu_test's 83 the scalar one).
TEST_F(LayerKernelsGpu, CausalSoftmaxAndCrossEntropy) {
  for (const int64_t seq : {int64_t{100}, int64_t{96}}) {
    for (const int64_t heads : {int64_t{6}, int64_t{5}}) {
      for (const bool in_place : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "seq " << seq << ", heads " << heads << (in_place ? ", in place" : ""));
        const std::vector<float> s = random(heads * seq * seq, 6, 7), dp = random(heads * seq * seq, 1, 8);
        std::vector<float> p(s.size()), ds(s.size());
        ASSERT_TRUE(causal_softmax_forward_cpu({heads, seq, DType::kF32, 0.25f, s.data(), p.data()}).ok());
        ASSERT_TRUE(causal_softmax_backward_cpu({heads, seq, DType::kF32, 0.25f, p.data(), dp.data(), ds.data()}).ok());
        // The backward reads the CPU's probabilities, so that it is compared on its own.
        DeviceArray<float> gs(*gpu_.device, s), gdp(*gpu_.device, dp), gp_cpu(*gpu_.device, p);
        DeviceArray<float> gp(*gpu_.device, unwritten_like(p)), gds(*gpu_.device, unwritten_like(ds));
        float* probs = in_place ? gs.data() : gp.data();
        float* dscores = in_place ? gdp.data() : gds.data();
        ASSERT_TRUE(causal_softmax_forward_cuda({heads, seq, DType::kF32, 0.25f, gs.data(), probs}, gpu_.cuda_stream()).ok());
        ASSERT_TRUE(causal_softmax_backward_cuda({heads, seq, DType::kF32, 0.25f, gp_cpu.data(), gdp.data(), dscores},
                                                 gpu_.cuda_stream()).ok());
        gpu_.sync();
        // Sums of <= seq terms in [0, 1]; the masked keys (j > i) must be exactly 0: in place
        // they held the scores, which the next GEMM would otherwise read.
        const std::vector<float> got_p = (in_place ? gs : gp).download();
        expect_close(got_p, p, testing::straight_line_bound(seq, 1.0), "probs");
        for (int64_t r = 0; r < heads * seq; ++r) {
          for (int64_t j = r % seq + 1; j < seq; ++j) ASSERT_EQ(got_p[static_cast<size_t>(r * seq + j)], 0.0f) << r << ", " << j;
        }
        expect_close((in_place ? gdp : gds).download(), ds, testing::straight_line_bound(seq, 0.25 * 2.0), "dscores");
      }
    }
  }

  for (const int64_t vocab : {int64_t{50304}, int64_t{60000}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t rows = 64;
    const std::vector<float> logits = random(rows * vocab, 8, 9);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919) % vocab);
    std::vector<float> losses(rows), dl(logits.size());
    ASSERT_TRUE(cross_entropy_cpu({rows, vocab, DType::kF32, logits.data(), targets.data(), losses.data(), dl.data(), 1.0f / rows}).ok());
    DeviceArray<float> gl(*gpu_.device, logits), gloss(*gpu_.device, unwritten_like(losses));
    DeviceArray<int32_t> gt(*gpu_.device, targets);
    ASSERT_TRUE(cross_entropy_cuda({rows, vocab, DType::kF32, gl.data(), gt.data(), gloss.data(), gl.data(), 1.0f / rows}, gpu_.cuda_stream()).ok());
    gpu_.sync();
    expect_cross_entropy_losses(gloss.download(), losses, vocab, "loss");
    // dlogits = (p - onehot) x scale, p = exp(shifted) / sum: relative to each value (most ~1e-6).
    const std::vector<float> got_dl = gl.download();
    for (size_t i = 0; i < dl.size(); ++i) {
      const double allowed = 2 * kExpRelative * std::fabs(dl[i]) + testing::straight_line_bound(vocab + 8, std::fabs(dl[i])) + 1e-30;
      ASSERT_TRUE(testing::within(got_dl[i], dl[i], allowed, static_cast<int64_t>(i))) << "dlogits";
    }
  }
}

// 16-bit logits, the gradient written over them, the target at the ends of a row too:
// GPT-2's vocabulary (the trainer's case: the shared-memory kernel) and 60,000 (a
// multiple of 8 whose fp32 row, 240,000 bytes, is past an H200's 232,448 per block: the
// plain 16-byte kernel); then a forward-only call (no dlogits). The sums as above; then
// each dlogit is rounded to 16 bits on both devices (the GPU in hardware, the same bits but
// for NaNs: convert_gpu_test), so values that straddle a rounding boundary may differ by
// one ulp: 2^-7 of the value in bf16, 2^-10 in fp16 plus its subnormal spacing 2^-24 (fp16
// runs with a loss scale of 1024, as fp16 training does; the smallest dlogits are subnormal).
template <typename T>
void expect_cross_entropy_16bit(testing::GpuFixture& gpu, double ulp, double subnormal_ulp, float loss_scale) {
  for (const int64_t vocab : {int64_t{50304}, int64_t{60000}}) {
    SCOPED_TRACE(::testing::Message() << "vocab " << vocab << (std::is_same_v<T, Bf16> ? ", bf16" : ", fp16"));
    const int64_t rows = 48;
    const std::vector<float> lf = random(rows * vocab, 8, 40);
    std::vector<T> logits(lf.size());
    for (size_t i = 0; i < lf.size(); ++i) logits[i] = from_f32<T>(lf[i]);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919) % vocab);
    targets[0] = 0, targets[1] = static_cast<int32_t>(vocab - 1), targets[2] = 7;
    std::vector<float> losses(rows);
    std::vector<T> dl(logits.size());
    const float scale = loss_scale / static_cast<float>(rows);
    const DType dtype = testing::dtype_of<T>();
    ASSERT_TRUE(cross_entropy_cpu({rows, vocab, dtype, logits.data(), targets.data(), losses.data(), dl.data(), scale}).ok());
    DeviceArray<T> gl(*gpu.device, logits);
    DeviceArray<float> gloss(*gpu.device, unwritten_like(losses)), gloss_only(*gpu.device, unwritten_like(losses));
    DeviceArray<int32_t> gt(*gpu.device, targets);
    ASSERT_TRUE(cross_entropy_cuda({rows, vocab, dtype, gl.data(), gt.data(), gloss_only.data(), nullptr, scale}, gpu.cuda_stream()).ok());
    ASSERT_TRUE(cross_entropy_cuda({rows, vocab, dtype, gl.data(), gt.data(), gloss.data(), gl.data(), scale}, gpu.cuda_stream()).ok());
    gpu.sync();
    expect_cross_entropy_losses(gloss_only.download(), losses, vocab, "16-bit loss, forward only");
    expect_cross_entropy_losses(gloss.download(), losses, vocab, "16-bit loss");
    const std::vector<T> got_dl = gl.download();
    for (size_t i = 0; i < dl.size(); ++i) {
      const double expected = to_f32(dl[i]);
      const double allowed = ulp * std::fabs(expected) + (kExpRelative + kExpRelative) * std::fabs(expected) +
                             testing::straight_line_bound(vocab + 8, std::fabs(expected)) + subnormal_ulp + 1e-30;
      ASSERT_TRUE(testing::within(to_f32(got_dl[i]), expected, allowed, static_cast<int64_t>(i))) << "16-bit dlogits";
    }
    // The targets' gradients are negative (p - 1 < 0), the rest positive: the one-hot landed.
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_LT(to_f32(got_dl[static_cast<size_t>(r * vocab + targets[static_cast<size_t>(r)])]), 0.0f) << "row " << r;
    }
  }
}

TEST_F(LayerKernelsGpu, CrossEntropyInBf16) { expect_cross_entropy_16bit<Bf16>(gpu_, 0x1p-7, 0, 1.0f); }
TEST_F(LayerKernelsGpu, CrossEntropyInFp16) { expect_cross_entropy_16bit<Half>(gpu_, 0x1p-10, 0x1p-24, 1024.0f); }

// Backward a warp per (row, 256 columns; 32 scalar): dims 48, 264 (2 chunks), 768 (3), 45
// scalar; fp32, bf16; tied fp32 base or not. Token 3 at every third position (86 of 256,
// a frequent token): its positions go round the warp 32 at a time, the last round short.
template <typename T>
void expect_embeddings_bit_identical(testing::GpuFixture& gpu, int64_t C, bool with_base) {
  SCOPED_TRACE(::testing::Message() << "dim " << C << (sizeof(T) == 2 ? ", bf16" : ", fp32") << (with_base ? ", base" : ""));
  const int64_t B = 8, T_ = 32, V = 300;
  std::vector<int32_t> tokens(B * T_);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 3 == 0 ? 3 : (i * 37) % 50);
  auto cast = [](const std::vector<float>& f) {
    std::vector<T> t(f.size());
    for (size_t i = 0; i < f.size(); ++i) t[i] = from_f32<T>(f[i]);
    return t;
  };
  const std::vector<T> wte = cast(random(V * C, 1, 10)), wpe = cast(random(T_ * C, 1, 11)), dout = cast(random(B * T_ * C, 1, 12));
  const std::vector<float> base = random(V * C, 1, 13);
  const float* base_ptr = with_base ? base.data() : nullptr;
  std::vector<int32_t> offsets, order;
  ASSERT_TRUE(build_token_index(tokens.data(), B * T_, V, &offsets, &order).ok());
  std::vector<T> out(dout.size()), dwte(wte.size()), dwpe(wpe.size());
  ASSERT_TRUE(embedding_forward_cpu({B, T_, C, V, testing::dtype_of<T>(), tokens.data(), wte.data(), wpe.data(), out.data()}).ok());
  ASSERT_TRUE(embedding_backward_cpu({B, T_, C, V, testing::dtype_of<T>(), dout.data(), offsets.data(), order.data(), base_ptr,
                                      dwte.data(), dwpe.data()}).ok());
  DeviceArray<int32_t> gtok(*gpu.device, tokens), goff(*gpu.device, offsets), gord(*gpu.device, order);
  DeviceArray<T> gwte(*gpu.device, wte), gwpe(*gpu.device, wpe), gdout(*gpu.device, dout);
  DeviceArray<float> gbase(*gpu.device, base);
  DeviceArray<T> gout(*gpu.device, unwritten_like(out)), gdwte(*gpu.device, unwritten_like(dwte)),
      gdwpe(*gpu.device, unwritten_like(dwpe));
  ASSERT_TRUE(embedding_forward_cuda({B, T_, C, V, testing::dtype_of<T>(), gtok.data(), gwte.data(), gwpe.data(), gout.data()},
                                     gpu.cuda_stream()).ok());
  ASSERT_TRUE(embedding_backward_cuda({B, T_, C, V, testing::dtype_of<T>(), gdout.data(), goff.data(), gord.data(),
                                       with_base ? gbase.data() : nullptr, gdwte.data(), gdwpe.data()},
                                      gpu.cuda_stream()).ok());
  gpu.sync();
  EXPECT_TRUE(testing::bitwise_equal(gout.download(), out, "embedding"));
  EXPECT_TRUE(testing::bitwise_equal(gdwte.download(), dwte, "dwte"));
  EXPECT_TRUE(testing::bitwise_equal(gdwpe.download(), dwpe, "dwpe"));
}

TEST_F(LayerKernelsGpu, EmbeddingsAreBitIdentical) {
  for (const int64_t C : {int64_t{48}, int64_t{264}, int64_t{768}, int64_t{45}}) {
    expect_embeddings_bit_identical<float>(gpu_, C, true);
    expect_embeddings_bit_identical<Bf16>(gpu_, C, true);
    expect_embeddings_bit_identical<Bf16>(gpu_, C, false);
  }
}

// The mlp's regression loss: one thread per row sums in the CPU loop's order.
TEST_F(LayerKernelsGpu, SquaredErrorIsBitIdentical) {
  const int64_t rows = 301, cols = 37;  // rows past one block, odd columns
  const std::vector<float> pred = random(rows * cols, 3, 14), target = random(rows * cols, 3, 15);
  std::vector<float> losses(rows), dpred(pred.size());
  const float scale = 1.0f / static_cast<float>(rows);
  ASSERT_TRUE(squared_error_cpu({rows, cols, DType::kF32, pred.data(), target.data(), losses.data(), dpred.data(), scale}).ok());
  DeviceArray<float> gpred(*gpu_.device, pred), gtarget(*gpu_.device, target), glosses(*gpu_.device, unwritten_like(losses)),
      gdpred(*gpu_.device, unwritten_like(dpred));
  ASSERT_TRUE(squared_error_cuda({rows, cols, DType::kF32, gpred.data(), gtarget.data(), glosses.data(), gdpred.data(), scale},
                                 gpu_.cuda_stream()).ok());
  gpu_.sync();
  EXPECT_TRUE(testing::bitwise_equal(glosses.download(), losses, "squared_error losses"));
  EXPECT_TRUE(testing::bitwise_equal(gdpred.download(), dpred, "squared_error dpred"));
}

}  // namespace
}  // namespace zdp::kernels
