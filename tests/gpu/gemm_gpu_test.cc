// cuBLASLt through kernels/gemm.h against the CPU GEMM (OpenBLAS, itself checked against
// float64 in tests/unit/gemm_cpu_test.cc) on the same inputs: bf16/fp16/fp32 in, fp32 or
// 16-bit out, every epilogue, transposes, strided batches, and the plan cache reused across calls.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "testing/device_arrays.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"
#ifdef ZDP_SIMT_EMULATION
#include "testing/simt/cublaslt_emulation.h"  // set_out_of_place_support
#endif

namespace zdp::kernels {
namespace {

using zdp::testing::DeviceArray;
using zdp::testing::GpuFixture;
using zdp::testing::TestRandom;

template <typename AB, typename C>
void gemm_matches_cpu(GpuFixture& gpu, Gemm& lt, TestRandom& rnd, Transpose ta, Transpose tb, int64_t m, int64_t n,
                      int64_t k, Epilogue e, Fp32Math math = Fp32Math::kIeee, int64_t pad = 0, bool residual = false) {
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
  // With `residual`: C = AB (+ bias) + R through GemmArgs::c_in (beta 1), R of C's type;
  // without, R = 0 (for the error bound below) and never passed.
  const std::vector<C> r = residual ? zdp::testing::encode<C>(rnd.signed_vector(static_cast<size_t>(m * n), 0.1f, 1.0f))
                                    : std::vector<C>(static_cast<size_t>(m * n));
  std::vector<float> r32(r.size());
  for (size_t i = 0; i < r.size(); ++i) r32[i] = to_f32(r[i]);

  GemmArgs g;
  g.a.trans = ta, g.b.trans = tb, g.m = m, g.n = n, g.k = k;
  g.a.ld = a_rows, g.b.ld = b_rows, g.c.ld = m, g.epilogue = e, g.fp32_math = math;
  if (residual) g.beta = 1.0f;
  GemmArgs cpu = g;
  cpu.a.data = a32.data(), cpu.b.data = b32.data(), cpu.c.data = c32.data(), cpu.bias = bias32.data();
  if (residual) cpu.c_in = r32.data();
  ASSERT_TRUE(make_cpu_gemm()->run(cpu, nullptr).ok());
  // The pre-activation, for the GELU allowance below.
  std::vector<float> z32(c32.size());
  GemmArgs pre = cpu;
  pre.c.data = z32.data();
  pre.epilogue = (e == Epilogue::kBiasGelu || e == Epilogue::kBias) ? Epilogue::kBias : Epilogue::kNone;
  ASSERT_TRUE(make_cpu_gemm()->run(pre, nullptr).ok());

  // `pad` elements into each allocation: 1 leaves 16-bit matrices only 2-byte aligned.
  DeviceArray<AB> da(*gpu.device, a, pad), db(*gpu.device, b, pad);
  // C's own values are never read with a residual (unwritten: NaN-like patterns).
  DeviceArray<C> dbias(*gpu.device, bias, pad),
      dc(*gpu.device, residual ? zdp::testing::unwritten_like(r) : std::vector<C>(c32.size()), pad), dr(*gpu.device, r, pad);
  g.ab_dtype = zdp::testing::dtype_of<AB>(), g.c_dtype = zdp::testing::dtype_of<C>();
  g.a.data = da.data(), g.b.data = db.data(), g.c.data = dc.data(), g.bias = dbias.data();
  if (residual) g.c_in = dr.data();
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
      // own order: (k + 3) roundings each, so twice that, plus the bias and residual adds.
      double err = 2 * (k + 3) * u * (mag + std::fabs(to_f32(bias[i])) + std::fabs(r32[at])) + 2 * input_u * mag;
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
    ZDP_SKIP_WITHOUT_GPU();
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

// A linear layer with its residual added in the GEMM (Ops::linear's `residual`: fc proj's
// forward), bias or not, bf16 and fp32, and with 2-byte-aligned pointers (pad 1); C's own
// contents (unwritten) must not reach the result.
TEST_F(GemmGpu, ResidualThroughCIn) {
  for (Epilogue e : {Epilogue::kNone, Epilogue::kBias}) {
    gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 96, 130, 200, e, Fp32Math::kIeee, 0, true);
    gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 96, 130, 200, e, Fp32Math::kIeee, 1, true);
    gemm_matches_cpu<float, float>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 37, 29, 53, e, Fp32Math::kIeee, 0, true);
  }
}

// The heuristic's query sees layouts, not pointers, so the algorithm it picks may lack
// out-of-place support (C apart from D: cuBLASLt's CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT).
// The wrapper takes the first candidate that has it, and where none does copies the
// residual into D and runs in place. The emulation's algorithms lack it on request (a
// matmul with C != D on one is refused there), so the copy runs here: with ld > m, the
// elements between D's columns stay D's own. Exact: small integers in fp32.
#ifdef ZDP_SIMT_EMULATION
TEST_F(GemmGpu, AResidualWithoutOutOfPlaceSupportIsCopiedIntoDFirst) {
  const int64_t m = 5, n = 3, k = 4, ld = 7;
  std::vector<float> a(m * k), b(k * n), r(ld * n), sentinel(ld * n, -7.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) + 1;
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i) * 10;
  struct Restore {  // the knob back for the binary's later tests, however this one ends
    ~Restore() { zdp_emu::lt::set_out_of_place_support(true); }
  } restore;
  for (const bool supported : {false, true}) {
    SCOPED_TRACE(supported ? "the algorithm supports C apart from D" : "no algorithm does");
    zdp_emu::lt::set_out_of_place_support(supported);
    auto lt = make_cublaslt_gemm(workspace_.data(), workspace_.bytes());
    ASSERT_TRUE(lt.ok()) << lt.status().to_string();
    DeviceArray<float> da(*gpu_.device, a), db(*gpu_.device, b), dr(*gpu_.device, r), dd(*gpu_.device, sentinel);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a.ld = m, g.b.ld = k, g.c.ld = ld, g.beta = 1.0f;
    g.ab_dtype = g.c_dtype = DType::kF32;
    g.a.data = da.data(), g.b.data = db.data(), g.c.data = dd.data(), g.c_in = dr.data();
    const Status st = (*lt)->run(g, gpu_.cuda_stream());
    ASSERT_TRUE(st.ok()) << st.to_string();
    gpu_.sync();
    const std::vector<float> got = dd.download();
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < ld; ++i) {
        double want = -7.0;
        if (i < m) {
          want = r[static_cast<size_t>(i + j * ld)];
          for (int64_t l = 0; l < k; ++l) want += double{a[static_cast<size_t>(i + l * m)]} * b[static_cast<size_t>(l + j * k)];
        }
        EXPECT_EQ(got[static_cast<size_t>(i + j * ld)], want) << "(" << i << ", " << j << ")";
      }
    }
  }
}
#endif

TEST_F(GemmGpu, TransformerShape) {
  SCOPED_TRACE(rnd_.trace());
  // A GPT-2 small MLP up-projection over 256 tokens: Y[256, 3072] = gelu(X[256, 768] W^T + b).
  gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 3072, 256, 768, Epilogue::kBiasGelu);
}

// The training epilogues (GELU_AUX_BIAS, DGELU_BGRAD, DGELU, BGRADB) against their CPU twin
// (kernels/gemm_cpu.cc, itself checked against float64 in gemm_cpu_test) on the same
// inputs, in T (bf16 or fp32, A/B and C alike). Allowances: the GEMM's (k + 3) roundings
// a side as above; cuBLASLt does not document how it evaluates GELU and its derivative:
// 2^-10 of the value's scale for each (as for the GELU epilogue above); a bias gradient
// sums n (DGELU_BGRAD) or k (BGRADB) values in its own order, each off by the per-element
// allowance, plus the sum's roundings; bf16 outputs round once more (allowed_error).
template <typename T>
void training_epilogues_match_cpu(GpuFixture& gpu, Gemm& lt, TestRandom& rnd) {
  const int64_t m = 256, n = 96, k = 128;
  const DType dt = zdp::testing::dtype_of<T>();
  auto make = [&](int64_t count, float hi) {
    const std::vector<T> v = zdp::testing::encode<T>(rnd.signed_vector(static_cast<size_t>(count), 0.1f, hi));
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = to_f32(v[i]);
    return std::make_pair(v, f);
  };
  const auto [a, a32] = make(m * k, 1.0f);
  const auto [b, b32] = make(k * n, 1.0f);
  const auto [bias, bias32] = make(m, 1.0f);
  const auto [pre, pre32] = make(m * n, 2.0f);
  const double u = zdp::testing::kUnitRoundoffF32;
  const double gemm_err = 2 * (k + 3) * u * k;  // |entries| <= 1: |AB| <= k
  DeviceArray<T> da(*gpu.device, a), db(*gpu.device, b), dbias(*gpu.device, bias), dpre(*gpu.device, pre);
  for (const Epilogue e : {Epilogue::kBiasGeluAux, Epilogue::kDGeluBgrad, Epilogue::kDGelu, Epilogue::kBgradB}) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a.ld = m, g.b.ld = k, g.c.ld = m, g.epilogue = e, g.aux_ld = m;
    if (e == Epilogue::kBgradB) g.b.trans = Transpose::kYes, g.b.ld = n;  // the weight gradient's layout (ops.cc)
    std::vector<float> c32(static_cast<size_t>(m * n)), aux32 = pre32, dbias32(static_cast<size_t>(std::max(m, n)));
    GemmArgs cpu = g;
    cpu.a.data = a32.data(), cpu.b.data = b32.data(), cpu.c.data = c32.data(), cpu.bias = bias32.data();
    cpu.aux = aux32.data(), cpu.dbias = dbias32.data();
    ASSERT_TRUE(make_cpu_gemm()->run(cpu, nullptr).ok()) << describe(cpu);
    DeviceArray<T> dc(*gpu.device, std::vector<T>(c32.size())), daux(*gpu.device, pre),
        ddbias(*gpu.device, std::vector<T>(dbias32.size()));
    g.ab_dtype = g.c_dtype = dt;
    g.a.data = da.data(), g.b.data = db.data(), g.c.data = dc.data(), g.bias = dbias.data();
    g.aux = daux.data(), g.dbias = ddbias.data();
    const Status st = lt.run(g, gpu.cuda_stream());
    ASSERT_TRUE(st.ok()) << st.to_string();
    gpu.sync();
    const std::vector<T> c = dc.download(), aux = daux.download(), dbv = ddbias.download();
    const double elem = 1.13 * gemm_err + 0x1p-10 * (k + 2.0);  // per element of C (values up to ~k)
    if (e == Epilogue::kBiasGeluAux) {
      for (size_t i = 0; i < c32.size(); ++i) {
        ASSERT_TRUE(zdp::testing::within(to_f32(aux[i]), aux32[i], zdp::testing::allowed_error(gemm_err + 2 * u, aux32[i], dt),
                                         static_cast<int64_t>(i))) << "aux " << describe(g);
        const double allowed = 1.13 * gemm_err + 0x1p-10 * (std::fabs(aux32[i]) + 1.0);
        ASSERT_TRUE(zdp::testing::within(to_f32(c[i]), c32[i], zdp::testing::allowed_error(allowed, c32[i], dt),
                                         static_cast<int64_t>(i))) << "gelu " << describe(g);
      }
    } else if (e == Epilogue::kDGeluBgrad || e == Epilogue::kDGelu) {
      for (size_t i = 0; i < c32.size(); ++i) {
        ASSERT_TRUE(zdp::testing::within(to_f32(c[i]), c32[i], zdp::testing::allowed_error(elem, c32[i], dt),
                                         static_cast<int64_t>(i))) << "dgelu " << describe(g);
      }
      for (int64_t i = 0; e == Epilogue::kDGeluBgrad && i < m; ++i) {
        double mag = 0;
        for (int64_t j = 0; j < n; ++j) mag += std::fabs(c32[static_cast<size_t>(i + j * m)]);
        const double allowed = n * elem + 2 * zdp::testing::straight_line_bound(static_cast<int>(n), mag);
        ASSERT_TRUE(zdp::testing::within(to_f32(dbv[static_cast<size_t>(i)]), dbias32[static_cast<size_t>(i)],
                                         zdp::testing::allowed_error(allowed, dbias32[static_cast<size_t>(i)], dt), i))
            << "dgelu bias gradient " << describe(g);
      }
    } else {
      for (int64_t j = 0; j < n; ++j) {
        double mag = 0;
        for (int64_t l = 0; l < k; ++l) mag += std::fabs(b32[static_cast<size_t>(j + l * n)]);
        const double allowed = 2 * zdp::testing::straight_line_bound(static_cast<int>(k), mag);
        ASSERT_TRUE(zdp::testing::within(to_f32(dbv[static_cast<size_t>(j)]), dbias32[static_cast<size_t>(j)],
                                         zdp::testing::allowed_error(allowed, dbias32[static_cast<size_t>(j)], dt), j))
            << "bgradb " << describe(g);
      }
      for (size_t i = 0; i < c32.size(); ++i) {
        ASSERT_TRUE(zdp::testing::within(to_f32(c[i]), c32[i], zdp::testing::allowed_error(gemm_err, c32[i], dt),
                                         static_cast<int64_t>(i))) << describe(g);
      }
    }
  }
}

TEST_F(GemmGpu, TrainingEpiloguesBf16AndFp32) {
  SCOPED_TRACE(rnd_.trace());
  training_epilogues_match_cpu<Bf16>(gpu_, *lt_, rnd_);
  training_epilogues_match_cpu<float>(gpu_, *lt_, rnd_);
}

// Attention's strided batches (trainer/models/attention.cc): the scores S = K^T Q of 6
// heads interleaved in one [T, 3d] activation (A and B strided by hd, ld 3d), each head's
// output a T x T block; and O = V P written interleaved into [T, d] (C strided by hd, ld d).
// Against the CPU's loop of single GEMMs, within the bound above (k + 3 roundings a side).
TEST_F(GemmGpu, StridedBatchOverInterleavedHeads) {
  SCOPED_TRACE(rnd_.trace());
  const int64_t H = 6, hd = 32, T = 80, d = H * hd;
  const std::vector<Bf16> qkv = zdp::testing::encode<Bf16>(rnd_.signed_vector(static_cast<size_t>(T * 3 * d), 0.1f, 1.0f));
  const std::vector<Bf16> probs = zdp::testing::encode<Bf16>(rnd_.signed_vector(static_cast<size_t>(H * T * T), 0.1f, 1.0f));
  std::vector<float> qkv32(qkv.size()), probs32(probs.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv32[i] = to_f32(qkv[i]);
  for (size_t i = 0; i < probs.size(); ++i) probs32[i] = to_f32(probs[i]);
  struct Shape {
    Transpose ta;
    int64_t m, n, k, a_off, lda, sa, b_is_probs, b_off, ldb, sb, ldc, sc, c_size;
  };
  const Shape shapes[] = {{Transpose::kYes, T, T, hd, d, 3 * d, hd, 0, 0, 3 * d, hd, T, T * T, H * T * T},
                          {Transpose::kNo, hd, T, T, 2 * d, 3 * d, hd, 1, 0, T, T * T, d, hd, T * d}};
  for (const Shape& sh : shapes) {
    GemmArgs g;
    g.a.trans = sh.ta, g.m = sh.m, g.n = sh.n, g.k = sh.k;
    g.a.ld = sh.lda, g.b.ld = sh.ldb, g.c.ld = sh.ldc;
    g.batch = H, g.stride_a = sh.sa, g.stride_b = sh.sb, g.stride_c = sh.sc;
    std::vector<float> want(static_cast<size_t>(sh.c_size));
    GemmArgs cpu = g;
    cpu.a.data = qkv32.data() + sh.a_off;
    cpu.b.data = (sh.b_is_probs ? probs32.data() : qkv32.data()) + sh.b_off;
    cpu.c.data = want.data();
    ASSERT_TRUE(make_cpu_gemm()->run(cpu, nullptr).ok());
    DeviceArray<Bf16> dqkv(*gpu_.device, qkv), dprobs(*gpu_.device, probs);
    DeviceArray<float> dc(*gpu_.device, std::vector<float>(want.size()));
    g.ab_dtype = DType::kBF16, g.c_dtype = DType::kF32;
    g.a.data = dqkv.data() + sh.a_off;
    g.b.data = (sh.b_is_probs ? dprobs.data() : dqkv.data()) + sh.b_off;
    g.c.data = dc.data();
    const Status st = lt_->run(g, gpu_.cuda_stream());
    ASSERT_TRUE(st.ok()) << st.to_string();
    gpu_.sync();
    const std::vector<float> got = dc.download();
    // Every input is in [-1, 1]: |sum of k products| <= k.
    const double err = 2.0 * static_cast<double>(sh.k + 3) * zdp::testing::kUnitRoundoffF32 * static_cast<double>(sh.k);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(zdp::testing::within(got[i], want[i], err, static_cast<int64_t>(i))) << describe(g);
    }
  }
}

TEST_F(GemmGpu, RejectsBadArguments) {
  GemmArgs g;
  g.m = g.n = g.k = 8;
  g.a.ld = 4;
  EXPECT_EQ(lt_->run(g, gpu_.cuda_stream()).code(), StatusCode::kInvalidArgument);
}

// Deterministic mode (pinned plans) picks its algorithm from the shape alone, so it must
// assume no more alignment than a 16-bit element's: A, B, C and the bias one element into
// their allocations (2-byte aligned), as a parameter at an odd offset of the engine's
// layout is. The plans are then reused at 256-byte aligned pointers (same shape, same
// plan), and the adaptive (unpinned) gemm takes the misaligned pointers too. Last in the
// file: a misaligned access would be a sticky CUDA error, failing every later test.
TEST_F(GemmGpu, PinnedPlansWorkAtAnyElementAlignment) {
  SCOPED_TRACE(rnd_.trace());
  auto pinned = make_cublaslt_gemm(workspace_.data(), workspace_.bytes(), /*pinned=*/true);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  for (const int64_t pad : {int64_t{1}, int64_t{0}}) {
    SCOPED_TRACE(pad);
    // The plain GEMM and the bias epilogue must run at 2-byte alignment (Ops::linear has no
    // fallback for them). The fused epilogues are not required here: pinned plans ask
    // cuBLASLt for 2-byte algorithms whatever the pointers, and where it has none
    // Ops::try_fused runs separate kernels (unpinned, they are checked above).
    for (Epilogue e : {Epilogue::kNone, Epilogue::kBias}) {
      gemm_matches_cpu<Bf16, Bf16>(gpu_, **pinned, rnd_, Transpose::kYes, Transpose::kNo, 96, 64, 80, e, Fp32Math::kIeee, pad);
    }
    gemm_matches_cpu<Bf16, float>(gpu_, **pinned, rnd_, Transpose::kNo, Transpose::kYes, 96, 64, 80, Epilogue::kNone,
                                  Fp32Math::kIeee, pad);
  }
  gemm_matches_cpu<Bf16, Bf16>(gpu_, *lt_, rnd_, Transpose::kYes, Transpose::kNo, 96, 64, 80, Epilogue::kBias,
                               Fp32Math::kIeee, 1);
}

}  // namespace
}  // namespace zdp::kernels
