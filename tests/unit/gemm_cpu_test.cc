// The CPU GEMM (OpenBLAS + bias/GELU epilogue) against a float64 triple loop, for every
// transpose combination, odd shapes, padded leading dimensions, alpha/beta, and each
// epilogue, under the one tolerance rule.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "testing/test_random.h"
#include "testing/tolerance.h"

namespace zdp::kernels {
namespace {

using zdp::testing::TestRandom;

struct Problem {
  GemmArgs args;
  std::vector<float> a, b, c, bias;
};

Problem make(TestRandom& rnd, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, Epilogue e, float beta) {
  Problem p;
  GemmArgs& g = p.args;
  g.a.trans = ta;
  g.b.trans = tb;
  g.m = m, g.n = n, g.k = k;
  const int64_t a_rows = ta == Transpose::kNo ? m : k, a_cols = ta == Transpose::kNo ? k : m;
  const int64_t b_rows = tb == Transpose::kNo ? k : n, b_cols = tb == Transpose::kNo ? n : k;
  g.a.ld = a_rows + 3;  // padded leading dimensions
  g.b.ld = b_rows + 1;
  g.c.ld = m + 2;
  p.a = rnd.signed_vector(static_cast<size_t>(g.a.ld * a_cols), 0.1f, 1.0f);
  p.b = rnd.signed_vector(static_cast<size_t>(g.b.ld * b_cols), 0.1f, 1.0f);
  p.c = rnd.signed_vector(static_cast<size_t>(g.c.ld * n), 0.1f, 1.0f);
  p.bias = rnd.signed_vector(static_cast<size_t>(m), 0.1f, 1.0f);
  g.a.data = p.a.data();
  g.b.data = p.b.data();
  g.c.data = p.c.data();
  g.bias = p.bias.data();
  g.epilogue = e;
  g.alpha = rnd.uniform(0.5f, 1.5f);
  g.beta = beta;
  return p;
}

double gelu64(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
}

// fp32 error bound of gelu_tanh(z) for z with error bound ez, first order: the derivative
// of GELU is below 1.13 in magnitude; evaluating it rounds x^2, x^3, 0.044715 x^3, the sum,
// the product by sqrt(2/pi) (5 roundings of values up to |z| + 0.045|z|^3, carried into
// the output through 0.5|z| x tanh' <= 0.5|z|), tanh_branchless (within 2 u absolute,
// counted as 4),
// then 1 + t, 0.5 x, and the last product (3 roundings of values up to 2|z|).
double gelu_error(double z, double ez) {
  const double u = zdp::testing::kUnitRoundoffF32, az = std::fabs(z);
  return 1.13 * ez + 0.5 * az * (5 * u * (az + 0.045 * az * az * az) + 4 * u) + 3 * u * 2 * az;
}

// c0: C before the call (its padding rows must be left alone); c_in: what beta * C read,
// when not c0 (GemmArgs::c_in).
void check(const Problem& p, const std::vector<float>& c0, const std::vector<float>* c_in_values = nullptr) {
  const GemmArgs& g = p.args;
  const std::vector<float>& read = c_in_values ? *c_in_values : c0;
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0, mag = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double a = g.a.trans == Transpose::kNo ? p.a[static_cast<size_t>(i + l * g.a.ld)]
                                                    : p.a[static_cast<size_t>(l + i * g.a.ld)];
        const double b = g.b.trans == Transpose::kNo ? p.b[static_cast<size_t>(l + j * g.b.ld)]
                                                    : p.b[static_cast<size_t>(j + l * g.b.ld)];
        sum += a * b;
        mag += std::fabs(a * b);
      }
      const double c_in = read[static_cast<size_t>(i + j * g.c.ld)];
      double z = g.alpha * sum + g.beta * c_in;
      // k products and k additions in whatever order OpenBLAS blocks them (at most k
      // roundings on any chain), then alpha, beta * C and their sum.
      double ez = zdp::testing::kUnitRoundoffF32 * ((g.k + 3) * (g.alpha * mag + std::fabs(g.beta * c_in)));
      const bool bias = g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu;
      const bool gelu = g.epilogue == Epilogue::kGelu || g.epilogue == Epilogue::kBiasGelu;
      if (bias) {
        z += p.bias[static_cast<size_t>(i)];
        ez += zdp::testing::kUnitRoundoffF32 * std::fabs(z);
      }
      const double want = gelu ? gelu64(z) : z;
      const double err = gelu ? gelu_error(z, ez) : ez;
      const double got = p.c[static_cast<size_t>(i + j * g.c.ld)];
      ASSERT_TRUE(zdp::testing::within(got, want, zdp::testing::allowed_error(err, want)))
          << describe(g) << " at (" << i << ", " << j << ")";
    }
  }
  // The padding rows of C are untouched.
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = g.m; i < g.c.ld; ++i) ASSERT_EQ(p.c[static_cast<size_t>(i + j * g.c.ld)], c0[static_cast<size_t>(i + j * g.c.ld)]);
  }
}

TEST(GemmCpu, MatchesFloat64ForEveryTransposeAndEpilogue) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  auto gemm = make_cpu_gemm();
  EXPECT_EQ(gemm->kind(), DeviceKind::kCpu);
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      for (Epilogue e : {Epilogue::kNone, Epilogue::kBias, Epilogue::kGelu, Epilogue::kBiasGelu}) {
        for (float beta : {0.0f, 0.75f}) {
          Problem p = make(rnd, ta, tb, 37, 29, 53, e, beta);
          const std::vector<float> c0 = p.c;
          const Status st = gemm->run(p.args, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          check(p, c0);
        }
      }
    }
  }
}

// beta * C read from c_in, a matrix of its own (the residual of a linear layer: Ops::linear):
// C's own values are never read (NaN here), its padding rows are left alone, c_in is not
// written; and c_in == C is the in-place case.
TEST(GemmCpu, BetaReadsCInInPlaceOfC) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  auto gemm = make_cpu_gemm();
  for (Epilogue e : {Epilogue::kNone, Epilogue::kBias, Epilogue::kBiasGelu}) {
    for (float beta : {1.0f, 0.75f}) {
      Problem p = make(rnd, Transpose::kYes, Transpose::kNo, 37, 29, 53, e, beta);
      const std::vector<float> residual = rnd.signed_vector(p.c.size(), 0.1f, 1.0f);
      for (int64_t j = 0; j < p.args.n; ++j) {
        for (int64_t i = 0; i < p.args.m; ++i) p.c[static_cast<size_t>(i + j * p.args.c.ld)] = NAN;
      }
      const std::vector<float> c0 = p.c, residual0 = residual;
      p.args.c_in = residual.data();
      const Status st = gemm->run(p.args, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_NE(describe(p.args).find("+c_in"), std::string::npos) << describe(p.args);
      check(p, c0, &residual);
      ASSERT_EQ(0, std::memcmp(residual.data(), residual0.data(), residual.size() * sizeof(float))) << "c_in was written";

      Problem q = make(rnd, Transpose::kYes, Transpose::kNo, 37, 29, 53, e, beta);
      const std::vector<float> q0 = q.c;
      q.args.c_in = q.c.data();  // the same as c_in = nullptr
      ASSERT_TRUE(gemm->run(q.args, nullptr).ok());
      check(q, q0);
    }
  }
}

TEST(GemmCpu, LargerTransformerLikeShape) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  // A linear layer Y[T, out] = X[T, in] W[out, in]^T + b in row-major terms (see gemm.h).
  Problem p = make(rnd, Transpose::kYes, Transpose::kNo, 192, 130, 257, Epilogue::kBiasGelu, 0.0f);
  const std::vector<float> c0 = p.c;
  ASSERT_TRUE(make_cpu_gemm()->run(p.args, nullptr).ok());
  check(p, c0);
}

TEST(GemmCpu, KZeroGivesBetaC) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  Problem p = make(rnd, Transpose::kNo, Transpose::kNo, 5, 4, 0, Epilogue::kBias, 0.5f);
  const std::vector<float> c0 = p.c;
  ASSERT_TRUE(make_cpu_gemm()->run(p.args, nullptr).ok());
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t i = 0; i < 5; ++i) {
      const size_t at = static_cast<size_t>(i + j * p.args.c.ld);
      EXPECT_FLOAT_EQ(p.c[at], 0.5f * c0[at] + p.bias[static_cast<size_t>(i)]);
    }
  }
}

// The epilogue's branch-free exp and tanh against float64 on a dense sweep: exp's chain
// is about 16 roundings (reduction, 6 Horner steps, scaling) of values up to e^x, tanh's
// about 20 of values up to 1 (exp, the sum, the quotient, 1 - q).
TEST(GemmCpu, BranchlessExpAndTanhMatchFloat64) {
  for (double x = -87.0; x <= 88.0; x += 1e-3) {
    const float xf = static_cast<float>(x);
    const double ref = std::exp(static_cast<double>(xf));
    ASSERT_TRUE(zdp::testing::within(exp_branchless(xf), ref, zdp::testing::straight_line_bound(16, ref))) << "exp " << xf;
  }
  for (double x = -12.0; x <= 12.0; x += 1e-5) {
    const float xf = static_cast<float>(x);
    const double ref = std::tanh(static_cast<double>(xf));
    ASSERT_TRUE(zdp::testing::within(tanh_branchless(xf), ref, zdp::testing::straight_line_bound(20, 1.0)))
        << "tanh " << xf;
  }
  EXPECT_EQ(tanh_branchless(100.0f), 1.0f);
  EXPECT_EQ(tanh_branchless(-100.0f), -1.0f);
  EXPECT_EQ(tanh_branchless(0.0f), 0.0f);
}

TEST(GemmCpu, RejectsBadArguments) {
  auto gemm = make_cpu_gemm();
  std::vector<float> a(16), b(16), c(16);
  GemmArgs g;
  g.m = g.n = g.k = 4;
  g.a.data = a.data(), g.b.data = b.data(), g.c.data = c.data();
  g.a.ld = 3;  // < m
  g.b.ld = g.c.ld = 4;
  Status st = gemm->run(g, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("lda 3 < rows of A"), std::string::npos) << st.message();
  g.a.ld = 4;
  g.epilogue = Epilogue::kBias;  // without a bias
  EXPECT_EQ(gemm->run(g, nullptr).code(), StatusCode::kInvalidArgument);
  g.epilogue = Epilogue::kNone;
  g.ab_dtype = DType::kBF16;  // the CPU path is fp32 only
  g.c_dtype = DType::kBF16;
  EXPECT_EQ(gemm->run(g, nullptr).code(), StatusCode::kInvalidArgument);
  g.ab_dtype = g.c_dtype = DType::kF32;
  // c_in: read only with beta != 0, not batched, and never partly over C.
  std::vector<float> r(32);
  g.c_in = r.data();
  st = gemm->run(g, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("c_in is read only with beta != 0"), std::string::npos) << st.message();
  g.beta = 1.0f;
  EXPECT_TRUE(gemm->run(g, nullptr).ok());
  g.c_in = r.data() + 8;  // r[8, 24) against C = r[0, 16)
  g.c.data = r.data();
  st = gemm->run(g, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("c_in partly overlaps C"), std::string::npos) << st.message();
  g.c_in = r.data() + 16;  // r[16, 32): next to C, not over it
  EXPECT_TRUE(gemm->run(g, nullptr).ok());
  g.batch = 2, g.stride_a = g.stride_b = 0, g.stride_c = 16;  // disjoint 4 x 4 blocks
  st = gemm->run(g, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("c_in with a batched GEMM"), std::string::npos) << st.message();
}

// The training epilogues' CPU twin (the reference of the cuBLASLt ones in
// gemm_gpu_test): aux = AB + bias and C = gelu(aux) exactly; C = AB * gelu'(aux) with
// dbias its row sums; dbias = op(B)'s column sums for both layouts of B. Against float64.
TEST(GemmCpu, TrainingEpilogues) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t m = 24, n = 7, k = 9;  // aux_ld 24: a multiple of 8
  const std::vector<float> a = rnd.signed_vector(static_cast<size_t>(m * k), 0.1f, 1.0f);
  const std::vector<float> b = rnd.signed_vector(static_cast<size_t>(k * n), 0.1f, 1.0f);
  const std::vector<float> bias = rnd.signed_vector(static_cast<size_t>(m), 0.1f, 1.0f);
  std::vector<float> pre = rnd.signed_vector(static_cast<size_t>(m * n), 0.1f, 2.0f);
  auto ab = [&](int64_t i, int64_t j) {
    double v = 0;
    for (int64_t l = 0; l < k; ++l) v += static_cast<double>(a[i + l * m]) * b[l + j * k];
    return v;
  };
  const double u = zdp::testing::kUnitRoundoffF32, err = (k + 3) * u * k;  // |entries| <= 1
  auto gemm = make_cpu_gemm();
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a.data = a.data(), g.a.ld = m, g.b.data = b.data(), g.b.ld = k;
  std::vector<float> c(static_cast<size_t>(m * n)), aux(c.size()), db(static_cast<size_t>(m));
  g.c.data = c.data(), g.c.ld = m;

  g.epilogue = Epilogue::kBiasGeluAux, g.bias = bias.data(), g.aux = aux.data(), g.aux_ld = m;
  ASSERT_TRUE(gemm->run(g, nullptr).ok());
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      const size_t at = static_cast<size_t>(i + j * m);
      ASSERT_TRUE(zdp::testing::within(aux[at], ab(i, j) + bias[static_cast<size_t>(i)], err + u * 2, static_cast<int64_t>(at)));
      ASSERT_EQ(c[at], gelu_tanh(aux[at])) << at;
    }
  }

  g.epilogue = Epilogue::kDGeluBgrad, g.bias = nullptr, g.aux = pre.data(), g.dbias = db.data();
  ASSERT_TRUE(gemm->run(g, nullptr).ok());
  for (int64_t i = 0; i < m; ++i) {
    double sum = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(i + j * m);
      const double grad = gelu_tanh_grad(pre[at]);  // |gelu'| < 1.13; its own rounding counted below
      const double want = ab(i, j) * grad;
      ASSERT_TRUE(zdp::testing::within(c[at], want, 1.13 * err + 16 * u * std::fabs(want) + u, static_cast<int64_t>(at)));
      sum += want, mag += std::fabs(want);
    }
    // Each term's error as above, then n additions.
    const double allowed = n * (1.13 * err + u) + 16 * u * mag + zdp::testing::straight_line_bound(static_cast<int>(n), mag);
    ASSERT_TRUE(zdp::testing::within(db[static_cast<size_t>(i)], sum, allowed, i));
  }
  // kDGelu: the same C, and no bias gradient written.
  const std::vector<float> c_dgelu_bgrad = c, db_before = db;
  g.epilogue = Epilogue::kDGelu, g.dbias = nullptr;
  ASSERT_TRUE(gemm->run(g, nullptr).ok());
  EXPECT_EQ(c, c_dgelu_bgrad);
  EXPECT_EQ(db, db_before);

  for (const Transpose tb : {Transpose::kNo, Transpose::kYes}) {
    GemmArgs w;  // dbias[j] = sum over l of op(B)(l, j)
    w.b.trans = tb;
    w.m = m, w.n = n, w.k = k;
    w.a.data = a.data(), w.a.ld = m;
    w.b.data = b.data(), w.b.ld = tb == Transpose::kNo ? k : n;  // B as k x n, or its n x k transpose
    w.c.data = c.data(), w.c.ld = m;
    w.epilogue = Epilogue::kBgradB, w.dbias = db.data();
    ASSERT_TRUE(gemm->run(w, nullptr).ok());
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t l = 0; l < k; ++l) {
        const float v = tb == Transpose::kNo ? b[static_cast<size_t>(l + j * k)] : b[static_cast<size_t>(j + l * n)];
        sum += v, mag += std::fabs(v);
      }
      ASSERT_TRUE(zdp::testing::within(db[static_cast<size_t>(j)], sum, zdp::testing::straight_line_bound(static_cast<int>(k), mag), j));
    }
  }
  // aux_ld must be a multiple of 8 (cuBLASLt's rule, checked on both backends); beta 0.
  g.aux_ld = m + 1;
  EXPECT_EQ(gemm->run(g, nullptr).code(), StatusCode::kInvalidArgument);
  g.aux_ld = m, g.beta = 1.0f;
  EXPECT_EQ(gemm->run(g, nullptr).code(), StatusCode::kInvalidArgument);
}

// A strided batch is the loop of its single multiplies: interleaved heads (A and C strided
// by less than their leading dimension) give, matrix by matrix, the bits of separate calls.
TEST(GemmCpu, StridedBatchEqualsSeparateCalls) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int64_t H = 3, hd = 5, T = 7, d = H * hd;
  const std::vector<float> qkv = rnd.signed_vector(static_cast<size_t>(T * 3 * d), 0.1f, 1.0f);
  std::vector<float> batched(static_cast<size_t>(H * T * T), -1.0f), separate(batched.size(), -2.0f);
  GemmArgs g;
  g.a.trans = Transpose::kYes;
  g.m = T, g.n = T, g.k = hd;
  g.a.ld = g.b.ld = 3 * d, g.c.ld = T;
  g.a.data = qkv.data() + d, g.b.data = qkv.data(), g.c.data = batched.data();
  g.batch = H, g.stride_a = hd, g.stride_b = hd, g.stride_c = T * T;
  auto gemm = make_cpu_gemm();
  ASSERT_TRUE(gemm->run(g, nullptr).ok());
  for (int64_t h = 0; h < H; ++h) {
    GemmArgs one = g;
    one.batch = 1;
    one.a.data = qkv.data() + d + h * hd, one.b.data = qkv.data() + h * hd, one.c.data = separate.data() + h * T * T;
    ASSERT_TRUE(gemm->run(one, nullptr).ok());
  }
  EXPECT_TRUE(zdp::testing::bitwise_equal(batched, separate, "batched scores"));
  // Rejected: batch 0, a negative stride, an epilogue, outputs that overlap (closer than m;
  // or m apart, which is m x n blocks overlapping: it was accepted, and on the GPU the
  // batch's matmuls would race on the overlap).
  for (int bad = 0; bad < 5; ++bad) {
    GemmArgs b = g;
    if (bad == 0) b.batch = 0;
    if (bad == 1) b.stride_b = -1;
    if (bad == 2) b.epilogue = Epilogue::kGelu;
    if (bad == 3) b.stride_c = T - 1;
    if (bad == 4) b.stride_c = T;
    const Status st = gemm->run(b, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("batch"), std::string::npos) << st.message();
  }
}

// set_cpu_gemm_threads pins the GEMM alone: the calling thread's OpenMP count, which every
// other CPU kernel uses, stays (pinning it through OpenBLAS set it to 1 for the thread, so
// a deterministic rank ran all its kernels on one thread), and the pinned GEMM gives the
// bits of a GEMM run on one thread (OpenBLAS's OpenMP build, the one Debian's
// libopenblas-openmp-dev gives and CMake prefers: its threads follow OpenMP's count).
TEST(GemmCpu, PinnedThreadsAreTheGemmsAlone) {
  TestRandom rnd;
  SCOPED_TRACE(rnd.trace());
  const int saved = omp_get_max_threads();
  Problem p = make(rnd, Transpose::kYes, Transpose::kNo, 96, 64, 4099, Epilogue::kNone, 0.0f);
  const std::vector<float> c0 = p.c;
  std::unique_ptr<Gemm> gemm = make_cpu_gemm();
  omp_set_num_threads(1);
  ASSERT_TRUE(gemm->run(p.args, nullptr).ok());
  const std::vector<float> one_thread = p.c;
  omp_set_num_threads(2);
  set_cpu_gemm_threads(1);
  p.c = c0;
  p.args.c.data = p.c.data();
  ASSERT_TRUE(gemm->run(p.args, nullptr).ok());
  EXPECT_EQ(omp_get_max_threads(), 2) << "the thread's own OpenMP count changed";
  EXPECT_EQ(std::memcmp(p.c.data(), one_thread.data(), p.c.size() * sizeof(float)), 0) << "not the one-thread bits";
  check(p, c0);
  set_cpu_gemm_threads(0);  // unpinned again, for the tests after this one in the binary
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace zdp::kernels
