// CPU optimizer-step benchmark, side by side in one run: the fused AdamW kernel against a
// plain memcpy moving the same bytes, and against a naive unfused AdamW (one pass per
// operation, as a framework without a fused optimizer runs it). Also the gradient check.
//
//   adamw_bench [--params 32M] [--rounds 7]        threads: OMP_NUM_THREADS
//
// Byte accounting (per parameter, bf16 gradient and bf16 parameter output):
//   read grad 2 + master 4 + m 4 + v 4, write master 4 + m 4 + v 4 + param 2 = 28 B.
// The memcpy copies 14 B/param, i.e. 14 B read + 14 B written = the same 28 B of traffic.
// GB/s = 28 B x params / time for every row (for the naive row: the useful bytes, though it
// moves more), so "vs memcpy" is a ratio of times. Each round runs every variant once, in
// turn, and each keeps its best time (best-of-N smooths out other load on the machine).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/size_arg.h"
#include "kernels/adamw.h"
#include "kernels/grad_check.h"

namespace {

using zdp::kernels::Bf16;
using Clock = std::chrono::steady_clock;

// Page-aligned, first-touched with the kernels' static split so pages sit near their threads.
template <typename T>
T* alloc(int64_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, static_cast<size_t>(n) * sizeof(T)) != 0) {
    std::fprintf(stderr, "adamw_bench: out of memory for %lld elements\n", static_cast<long long>(n));
    std::exit(1);
  }
  T* t = static_cast<T*>(p);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) std::memset(&t[i], 0, sizeof(T));
  return t;
}

double seconds(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The unfused update: every operation a separate pass over whole arrays, with fp32
// temporaries for the decoded gradient and the denominator.
void naive_adamw(int64_t n, const Bf16* grad, float* p, float* m, float* v, Bf16* out, float* g32, float* denom,
                 const zdp::kernels::AdamWCoeffs& c, float decay) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) g32[i] = zdp::kernels::to_f32(grad[i]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) g32[i] = g32[i] * c.grad_scale;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] * decay;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = c.beta1 * m[i];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = m[i] + c.one_minus_beta1 * g32[i];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = c.beta2 * v[i];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] + c.one_minus_beta2 * (g32[i] * g32[i]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) denom[i] = std::sqrt(v[i]) / c.bc2_sqrt + c.eps;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] - c.step_size * (m[i] / denom[i]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = zdp::kernels::from_f32<Bf16>(p[i]);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = int64_t{32} << 20;
  int rounds = 7;
  // Every argument is a flag and its value: a lone last one (--help, a value forgotten)
  // is a usage error, not ignored.
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--params" && has_value) n = zdp::bench::parse_binary_size(argv[i + 1]);
    else if (flag == "--rounds" && has_value) rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: adamw_bench [--params 32M] [--rounds 7]\n");
      return 2;
    }
  }
  if (n < 1) {
    std::fprintf(stderr, "adamw_bench: --params must be a positive count such as 32M\n");
    return 2;
  }
  const int threads = omp_get_max_threads();
  std::printf("adamw_bench: %lld params (%.0f MiB of optimizer traffic per step), %d OpenMP threads, best of %d\n",
              static_cast<long long>(n), 28.0 * n / (1 << 20), threads, rounds);

  float* master = alloc<float>(n);
  float* m = alloc<float>(n);
  float* v = alloc<float>(n);
  Bf16* grad = alloc<Bf16>(n);
  Bf16* out = alloc<Bf16>(n);
  float* g32 = alloc<float>(n);
  float* denom = alloc<float>(n);
  char* copy_src = alloc<char>(14 * n);
  char* copy_dst = alloc<char>(14 * n);
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> tile(1 << 16);
    for (float& x : tile) x = u(rng);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float x = tile[static_cast<size_t>(i) % tile.size()];
      master[i] = x;
      m[i] = 1e-3f * x;
      v[i] = 1e-6f * (1.0f + x * x);
      grad[i] = zdp::kernels::from_f32<Bf16>(0.1f * x);
    }
  }

  zdp::kernels::AdamWArgs a;
  a.count = n;
  a.master = master, a.m = m, a.v = v;
  a.grad = grad;
  a.grad_dtype = zdp::DType::kBF16;
  a.param_out = out;
  a.param_dtype = zdp::DType::kBF16;
  a.lr = 1e-4f;
  a.weight_decay = 0.1f;
  a.grad_scale = 0.5f;
  int64_t step = 1;
  auto fused = [&](zdp::kernels::Rounding r) {
    a.rounding = r;
    a.step = step++;
    const zdp::Status st = zdp::kernels::adamw_update_cpu(a);
    if (!st.ok()) {
      std::fprintf(stderr, "adamw_bench: %s\n", st.to_string().c_str());
      std::exit(1);
    }
  };
  auto naive = [&] {
    a.step = step++;
    const zdp::kernels::AdamWCoeffs c = zdp::kernels::adamw_coeffs(a).value();
    naive_adamw(n, grad, master, m, v, out, g32, denom, c, zdp::kernels::adamw_decay_factor(c.lr, a.weight_decay));
  };
  auto copy = [&] {
#pragma omp parallel
    {
      const int64_t bytes = 14 * n, t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t b = bytes * t / nt, e = bytes * (t + 1) / nt;
      std::memcpy(copy_dst + b, copy_src + b, static_cast<size_t>(e - b));
    }
  };
  zdp::kernels::GradStats stats;
  auto check = [&] {
    zdp::kernels::GradCheckArgs g;
    g.grad = grad;
    g.dtype = zdp::DType::kBF16;
    g.count = n;
    g.out = &stats;
    if (!zdp::kernels::grad_check_cpu(g).ok()) std::exit(1);
  };

  struct Row {
    const char* name;
    std::function<void()> fn;
    double bytes_per_param;
    double best = 1e30;
  };
  std::vector<Row> rows = {
      {"memcpy (14 B/param copied)", copy, 28.0},
      {"fused AdamW, bf16 out (nearest)", [&] { fused(zdp::kernels::Rounding::kNearest); }, 28.0},
      {"fused AdamW, bf16 out (stochastic)", [&] { fused(zdp::kernels::Rounding::kStochastic); }, 28.0},
      {"naive unfused AdamW (10 passes)", naive, 28.0},
      {"grad check, bf16 (2 B/param read)", check, 2.0},
  };
  for (Row& r : rows) r.fn();  // warm-up: page faults, thread pool
  for (int round = 0; round < rounds; ++round) {
    for (Row& r : rows) r.best = std::min(r.best, seconds(r.fn));
  }

  const double memcpy_s = rows[0].best;
  std::printf("\n%-38s %10s %10s %12s\n", "variant", "time ms", "GB/s", "vs memcpy");
  for (const Row& r : rows) {
    const double gbs = r.bytes_per_param * n / r.best / 1e9;
    // For the grad check, compare bandwidth rather than time (it moves 2 B, not 28 B).
    const double ratio = r.bytes_per_param == 28.0 ? memcpy_s / r.best : gbs / (28.0 * n / memcpy_s / 1e9);
    std::printf("%-38s %10.2f %10.2f %11.2fx\n", r.name, r.best * 1e3, gbs, ratio);
  }
  const double fused_ratio = memcpy_s / rows[1].best;
  std::printf("\nsummary: cpu fused AdamW = %.2fx memcpy (target >= 0.70), %.2fx faster than naive unfused; "
              "%.1f GB/s, %d threads\n",
              fused_ratio, rows[3].best / rows[1].best, 28.0 * n / rows[1].best / 1e9, threads);
  std::printf("(grad sum_sq %.6g, nonfinite %.0f)\n", stats.sum_sq, stats.nonfinite);
  return 0;
}
