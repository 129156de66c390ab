// cuBLASLt through kernels/gemm.h against the CPU GEMM (OpenBLAS, itself checked against
// float64 in tests/unit/gemm_cpu_test.cc) on the same inputs: bf16/fp16/fp32 in, fp32 or
// 16-bit out, every epilogue, transposes, and the plan cache reused across calls.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gemm.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::DeviceArray;
using zdp::testing::GpuFixture;
using zdp::testing::TestRandom;

template <typename AB, typename C>
void gemm_matches_cpu(GpuFixture& gpu, Gemm& lt, TestRandom& rnd, Transpose ta, Transpose tb, int64_t m, int64_t n,
                      int64_t k, Epilogue e, Fp32Math math = Fp32Math::kIeee) {
  const int64_t a_rows = ta == Transpose::kNo ? m : k, a_cols = ta == Transpose::kNo ? k : m;
  const int64_t b_rows = tb == Transpose::kNo ? k : n, b_cols = tb == Transpose::kNo ? n : k;
  // Inputs rounded to the A/B type once; the CPU sees the same values in fp32 (exact).
  const std::vector<AB> a = zdp::testing::encode<AB>(rnd.signed_vector(static_cast<size_t>(a_rows * a_cols), 0.1f, 1.0f));
  const std::vector<AB> b = zdp::testing::encode<AB>(rnd.signed_vector(static_cast<size_t>(b_rows * b_cols), 0.1f, 1.0f));
  const std::vector<C> bias = zdp::testing::encode<C>(rnd.signed_vector(static_cast<size_t>(m), 0.1f, 1.0f));
  std::vector<float> a32(a.size()), b32(b.size()), bias32(bias.size()), c32(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i) a32[i] = to_f32(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b32[i] = to_f32(b[i]);
  for (size_t i = 0; i < bias.size(); ++i) bias32[i] = to_f32(bias[i]);

  GemmArgs g;
  g.a.trans = ta, g.b.trans = tb, g.m = m, g.n = n, g.k = k;
  g.a.ld = a_rows, g.b.ld = b_rows, g.c.ld = m, g.epilogue = e, g.fp32_math = math;
  GemmArgs cpu = g;
  cpu.a.data = a32.data(), cpu.b.data = b32.data(), cpu.c.data = c32.data(), cpu.bias = bias32.data();
  ASSERT_TRUE(make_cpu_gemm()->run(cpu, nullptr).ok());
  // The pre-activation, for the GELU allowance below.
  std::vector<float> z32(c32.size());
  GemmArgs pre = cpu;
  pre.c.data = z32.data();
  pre.epilogue = (e == Epilogue::kBiasGelu || e == Epilogue::kBias) ? Epilogue::kBias : Epilogue::kNone;
  ASSERT_TRUE(make_cpu_gemm()->run(pre, nullptr).ok());

  DeviceArray<AB> da(*gpu.device, a), db(*gpu.device, b);
  DeviceArray<C> dbias(*gpu.device, bias), dc(*gpu.device, std::vector<C>(c32.size()));
  g.ab_dtype = zdp::testing::dtype_of<AB>(), g.c_dtype = zdp::testing::dtype_of<C>();
  g.a.data = da.data(), g.b.data = db.data(), g.c.data = dc.data(), g.bias = dbias.data();
  for (int call = 0; call < 2; ++call) {  // the second call reuses the cached plan
    const Status st = lt.run(g, gpu.cuda_stream());
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  gpu.sync();
  const std::vector<C> got = dc.download();
  const double u = zdp::testing::kUnitRoundoffF32;
  const double input_u = (g.ab_dtype == DType::kF32 && math == Fp32Math::kTf32) ? 0x1p-11 : 0.0;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double mag = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double av = ta == Transpose::kNo ? a32[i + l * a_rows] : a32[l + i * a_rows];
        const double bv = tb == Transpose::kNo ? b32[l + j * b_rows] : b32[j + l * b_rows];
        mag += std::fabs(av * bv);
      }
      const size_t at = static_cast<size_t>(i + j * m);
      // Both sides sum k exact products (bf16/fp16 products are exact in fp32) in their
      // own order: (k + 3) roundings each, so twice that, plus the bias add.
      double err = 2 * (k + 3) * u * (mag + std::fabs(to_f32(bias[i]))) + 2 * input_u * mag;
      // Exception: TF32 rounds each input to 10 mantissa bits (2 x 2^-11 per product), counted
      // by input_u above. Exception: cuBLASLt does not document how its GELU epilogue
      // evaluates tanh; allow 2^-10 of the pre-activation's magnitude (+1) for it.
      if (e == Epilogue::kGelu || e == Epilogue::kBiasGelu) err = 1.13 * err + 0x1p-10 * (std::fabs(z32[at]) + 1.0);
      const double want = c32[at];
      ASSERT_TRUE(zdp::testing::within(to_f32(got[at]), want, zdp::testing::allowed_error(err, want, g.c_dtype)))
          << describe(g) << " at (" << i << ", " << j << ")";
    }
  }
}

class GemmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(gpu_.init());
    auto ws = gpu_.device->allocate(kGemmWorkspaceBytes, MemCategory::kWorkspace);
    ASSERT_TRUE(ws.ok()) << ws.status().to_string();
    workspace_ = std::move(ws).value();
    auto lt = make_cublaslt_gemm(workspace_.data(), workspace_.bytes());
    ASSERT_TRUE(lt.ok()) << lt.status().to_string();
    lt_ = std::move(lt).value();
  }
  GpuFixture gpu_;
  DeviceBuffer workspace_;
  std::unique_ptr<Gemm> lt_;
  TestRandom rnd_;
};

TEST_F(GemmGpu, Bf16EveryEpilogueAndTranspose) {
  SCOPED_TRACE(rnd_.trace());
  EXPECT_EQ(lt_->kind(), DeviceKind::kCuda);
  for (Epilogue e : {Epilogue::kNone, Epilogue::kBias, Epilogue::kGelu, Epilogue::kBiasGelu}) {
    gemm_matches_cpu<Bf16, float>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 256, 192, 320, e);
    gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 256, 192, 320, e);
  }
  gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kNo, Transpose::kNo, 128, 64, 96, Epilogue::kBias);
  gemm_matches_cpu<Bf16, float>(gpu_, *lt_, rnd_, Transpose::kNo, Transpose::kYes, 128, 256, 64, Epilogue::kNone);
}

TEST_F(GemmGpu, Fp16AndFp32) {
  SCOPED_TRACE(rnd_.trace());
  gemm_matches_cpu<Half, Half>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 256, 128, 256, Epilogue::kBiasGelu);
  gemm_matches_cpu<Half, float>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 256, 128, 256, Epilogue::kBias);
  gemm_matches_cpu<float, float>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 192, 96, 160, Epilogue::kBias);
  gemm_matches_cpu<float, float>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 192, 96, 160, Epilogue::kNone,
                                 Fp32Math::kTf32);
}

TEST_F(GemmGpu, TransformerShape) {
  SCOPED_TRACE(rnd_.trace());
  // A GPT-2 small MLP up-projection over 256 tokens: Y[256, 3072] = gelu(X[256, 768] W^T + b).
  gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 3072, 256, 768, Epilogue::kBiasGelu);
}

TEST_F(GemmGpu, RejectsBadArguments) {
  GemmArgs g;
  g.m = g.n = g.k = 8;
  g.a.ld = 4;
  EXPECT_EQ(lt_->run(g, gpu_.cuda_stream()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
