// The CPU GEMM: OpenBLAS cblas_sgemm (column-major), then bias and GELU applied in one
// pass over C. fp32 only: this hardware has no fast bf16 matrix path in OpenBLAS.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <string>

#include "kernels/cpu_parallel.h"
#include "kernels/elementwise.h"  // gelu_tanh_grad
#include "kernels/gemm.h"

namespace zdp::kernels {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) { return t == Transpose::kYes ? CblasTrans : CblasNoTrans; }

// Bias and GELU over one column of C, one vectorised pass each.
ZDP_CPU_CLONES void epilogue_column(float* __restrict col, int m, Epilogue e, const float* __restrict bias) {
  if (e == Epilogue::kBias || e == Epilogue::kBiasGelu) {
    for (int i = 0; i < m; ++i) col[i] = col[i] + bias[i];
  }
  if (e == Epilogue::kGelu || e == Epilogue::kBiasGelu) {
    for (int i = 0; i < m; ++i) col[i] = gelu_tanh(col[i]);
  }
}

// The thread count set_cpu_gemm_threads pinned the GEMM to; 0: none (the environment's).
std::atomic<int> g_pinned_gemm_threads{0};

// OpenBLAS's OpenMP build takes a call's thread count from the calling thread's OpenMP
// count, and openblas_set_num_threads sets that count: for every later parallel loop of
// the thread too. Pinned there, a deterministic rank ran LayerNorm, softmax, the
// optimizer and every other CPU kernel on one thread. So the pinned count is set for the
// GEMM call alone and the thread's own count restored after it. (The pthreads build keeps
// a pool of its own, sized once by set_cpu_gemm_threads.)
class PinnedGemmThreads {
 public:
  PinnedGemmThreads() {
    const int pinned = g_pinned_gemm_threads.load(std::memory_order_relaxed);
    static const bool openmp_build = openblas_get_parallel() == OPENBLAS_OPENMP;  // asked once, not per GEMM
    if (pinned <= 0 || !openmp_build) return;
    saved_ = omp_get_max_threads();
    if (saved_ != pinned) omp_set_num_threads(pinned);
    else saved_ = 0;
  }
  ~PinnedGemmThreads() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  PinnedGemmThreads(const PinnedGemmThreads&) = delete;
  PinnedGemmThreads& operator=(const PinnedGemmThreads&) = delete;

 private:
  int saved_ = 0;  // the thread's count to restore; 0: nothing changed
};

class OpenBlasGemm final : public Gemm {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }

  Status run(const GemmArgs& g, cudaStream_t /*stream*/) override {
    ZDP_RETURN_IF_ERROR(check_gemm_args(g));
    if (g.ab_dtype != DType::kF32 || g.c_dtype != DType::kF32) {
      return Status(StatusCode::kInvalidArgument, describe(g) + ": the CPU GEMM takes fp32 A, B and C only");
    }
    for (int64_t dim : {g.m, g.n, g.k, g.a.ld, g.b.ld, g.c.ld}) {
      if (dim > INT_MAX) return Status(StatusCode::kInvalidArgument, describe(g) + ": a dimension exceeds INT_MAX");
    }
    if (g.m == 0 || g.n == 0) return Status::Ok();
    for (int64_t i = 0; i < g.batch; ++i) {  // a batch is a loop of the very same calls
      GemmArgs one = g;
      if (i > 0) {
        if (g.a.data) one.a.data = static_cast<const float*>(g.a.data) + i * g.stride_a;  // null when k = 0
        if (g.b.data) one.b.data = static_cast<const float*>(g.b.data) + i * g.stride_b;
        one.c.data = static_cast<float*>(g.c.data) + i * g.stride_c;
      }
      run_one(one);
    }
    return Status::Ok();
  }

 private:
  static void run_one(const GemmArgs& g) {
    float* c = static_cast<float*>(g.c.data);
    const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    const int ldc = static_cast<int>(g.c.ld);
    if (g.c_in != nullptr && g.c_in != c) copy_c(static_cast<const float*>(g.c_in), c, m, n, ldc);
    if (k == 0) {
      // BLAS leaves C = beta * C for k = 0 too; do it here so that A/B may be null.
      scale_c(c, m, n, ldc, g.beta);
    } else {
      const PinnedGemmThreads pinned;
      cblas_sgemm(CblasColMajor, to_cblas(g.a.trans), to_cblas(g.b.trans), m, n, k, g.alpha,
                  static_cast<const float*>(g.a.data), static_cast<int>(g.a.ld), static_cast<const float*>(g.b.data),
                  static_cast<int>(g.b.ld), g.beta, c, ldc);
    }
    switch (g.epilogue) {
      case Epilogue::kBiasGeluAux: return bias_gelu_aux(g, c, m, n, ldc);
      case Epilogue::kDGeluBgrad: return dgelu_bgrad(g, c, m, n, ldc);
      case Epilogue::kDGelu: return dgelu(g, c, m, n, ldc);
      case Epilogue::kBgradB: return bgrad_b(g, n, k);
      default: apply_epilogue(c, m, n, ldc, g.epilogue, static_cast<const float*>(g.bias));
    }
  }

  // aux = C + bias (the pre-activation), C = gelu(aux), column by column.
  static void bias_gelu_aux(const GemmArgs& g, float* c, int m, int n, int ldc) {
    const float* bias = static_cast<const float*>(g.bias);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(m) * n > 65536)
    for (int j = 0; j < n; ++j) {
      float* col = c + static_cast<int64_t>(j) * ldc;
      float* aux = static_cast<float*>(g.aux) + static_cast<int64_t>(j) * g.aux_ld;
      for (int i = 0; i < m; ++i) {
        aux[i] = col[i] + bias[i];
        col[i] = gelu_tanh(aux[i]);
      }
    }
  }

  // C = C * gelu'(aux).
  static void dgelu(const GemmArgs& g, float* c, int m, int n, int ldc) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(m) * n > 65536)
    for (int j = 0; j < n; ++j) {
      float* col = c + static_cast<int64_t>(j) * ldc;
      const float* aux = static_cast<const float*>(g.aux) + static_cast<int64_t>(j) * g.aux_ld;
      for (int i = 0; i < m; ++i) col[i] = col[i] * gelu_tanh_grad(aux[i]);
    }
  }

  // C = C * gelu'(aux); dbias = the row sums of the new C, columns added in order.
  static void dgelu_bgrad(const GemmArgs& g, float* c, int m, int n, int ldc) {
    dgelu(g, c, m, n, ldc);
    float* db = static_cast<float*>(g.dbias);
    for (int i = 0; i < m; ++i) db[i] = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float* col = c + static_cast<int64_t>(j) * ldc;
      for (int i = 0; i < m; ++i) db[i] += col[i];
    }
  }

  // dbias[j] = sum over l of op(B)(l, j), l in order.
  static void bgrad_b(const GemmArgs& g, int n, int k) {
    const float* b = static_cast<const float*>(g.b.data);
    float* db = static_cast<float*>(g.dbias);
    const int64_t ldb = g.b.ld;
    for (int j = 0; j < n; ++j) db[j] = 0.0f;
    if (g.b.trans == Transpose::kYes) {  // op(B)(l, j) = B[j + l ldb]
      for (int l = 0; l < k; ++l) {
        for (int j = 0; j < n; ++j) db[j] += b[j + l * ldb];
      }
    } else {  // op(B)(l, j) = B[l + j ldb]
      for (int j = 0; j < n; ++j) {
        for (int l = 0; l < k; ++l) db[j] += b[l + j * ldb];
      }
    }
  }

  // C's m x n from `from` (leading dimension ldc too), for beta * c_in.
  static void copy_c(const float* from, float* c, int m, int n, int ldc) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(m) * n > 65536)
    for (int j = 0; j < n; ++j) {
      std::memcpy(c + static_cast<int64_t>(j) * ldc, from + static_cast<int64_t>(j) * ldc, sizeof(float) * m);
    }
  }

  static void scale_c(float* c, int m, int n, int ldc, float beta) {
    for (int j = 0; j < n; ++j) {
      float* col = c + static_cast<int64_t>(j) * ldc;
      for (int i = 0; i < m; ++i) col[i] = beta == 0.0f ? 0.0f : beta * col[i];
    }
  }

  static void apply_epilogue(float* c, int m, int n, int ldc, Epilogue e, const float* bias) {
    if (e == Epilogue::kNone) return;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(m) * n > 65536)
    for (int j = 0; j < n; ++j) epilogue_column(c + static_cast<int64_t>(j) * ldc, m, e, bias);
  }
};

}  // namespace

namespace {

// OpenBLAS's OpenMP build runs a threaded GEMM as one team of its thread count whose
// members busy-wait for each other. OMP_THREAD_LIMIT caps the team below that count, and
// the members it waits for never come: with OMP_THREAD_LIMIT=1 and dp-launch's
// OPENBLAS_NUM_THREADS=2, a rank spun at 100% CPU in its first GEMM, forever. So the count
// never exceeds the limit.
int capped_threads(int threads) { return std::max(1, std::min(threads, omp_get_thread_limit())); }

}  // namespace

std::unique_ptr<Gemm> make_cpu_gemm() {
  const int threads = openblas_get_num_threads();
  if (capped_threads(threads) != threads) openblas_set_num_threads(capped_threads(threads));
  return std::make_unique<OpenBlasGemm>();
}

void set_cpu_threads(int threads) {
  omp_set_num_threads(capped_threads(threads));
  if (openblas_get_parallel() != OPENBLAS_OPENMP) openblas_set_num_threads(capped_threads(threads));
}

std::string cpu_gemm_library() {
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  return std::string(config ? config : "OpenBLAS") + ", core " + (core ? core : "?");
}

void set_cpu_gemm_threads(int threads) {
  g_pinned_gemm_threads.store(threads > 0 ? capped_threads(threads) : 0, std::memory_order_relaxed);
  if (openblas_get_parallel() != OPENBLAS_OPENMP) {
    openblas_set_num_threads(capped_threads(threads > 0 ? threads : omp_get_max_threads()));
  }
}

}  // namespace zdp::kernels
