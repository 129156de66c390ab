// CPU GEMM benchmark: OpenBLAS sgemm through kernels/gemm.h at transformer-layer shapes,
// plain and with the bias+GELU epilogue side by side (the epilogue is a separate pass on
// the CPU, so its cost shows as the difference).
//
//   gemm_bench [--tokens 512] [--d 768] [--rounds 5]     threads: OMP_NUM_THREADS /
//                                                         OPENBLAS_NUM_THREADS
// Shapes: a layer's forward and backward products (bench/gemm_shapes.h).
// GFLOP/s = 2 m n k / time (the epilogue's work is not counted); best of --rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/gemm_shapes.h"
#include "kernels/gemm.h"

namespace {

using zdp::bench::GemmShape;
using zdp::kernels::Epilogue;
using zdp::kernels::GemmArgs;

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 512, d = 768;
  int rounds = 5;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {  // a flag without its value (or --help) is not ignored
      std::fprintf(stderr, "gemm_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i];
    if (flag == "--tokens") tokens = std::atoll(argv[i + 1]);
    else if (flag == "--d") d = std::atoll(argv[i + 1]);
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: gemm_bench [--tokens 512] [--d 768] [--rounds 5]\n");
      return 2;
    }
  }
  // Positive and bounded: a negative count aborted on a std::length_error, 0 printed rows
  // of 0 GFLOP/s and an exit status of success.
  if (tokens < 1 || tokens > (int64_t{1} << 20) || d < 1 || d > (int64_t{1} << 16)) {
    std::fprintf(stderr, "gemm_bench: --tokens must be in [1, 2^20] and --d in [1, 2^16] (got %lld, %lld)\n",
                 static_cast<long long>(tokens), static_cast<long long>(d));
    return 2;
  }
  const std::vector<GemmShape> shapes = zdp::bench::transformer_layer_shapes(d, tokens);
  std::printf("gemm_bench (OpenBLAS sgemm, fp32): d = %lld, tokens = %lld, best of %d\n\n",
              static_cast<long long>(d), static_cast<long long>(tokens), rounds);
  std::printf("%-8s %6s %6s %6s %4s %12s %18s %12s\n", "layer", "m", "n", "k", "op", "GFLOP/s", "+bias+gelu GFLOP/s",
              "epilogue %");
  auto gemm = zdp::kernels::make_cpu_gemm();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  double best_overall = 0;
  for (const GemmShape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.a_rows() * s.a_cols())), b(static_cast<size_t>(s.b_rows() * s.b_cols()));
    std::vector<float> c(static_cast<size_t>(s.m * s.n)), bias(static_cast<size_t>(s.m));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (float& x : bias) x = u(rng);
    GemmArgs g;
    g.a.trans = s.ta, g.b.trans = s.tb;
    g.m = s.m, g.n = s.n, g.k = s.k;
    g.a.data = a.data(), g.a.ld = s.a_rows();
    g.b.data = b.data(), g.b.ld = s.b_rows();
    g.c.data = c.data(), g.c.ld = s.m;
    g.bias = bias.data();
    double best[2] = {1e30, 1e30};
    for (int round = 0; round <= rounds; ++round) {  // round 0 is the warm-up
      for (int e = 0; e < 2; ++e) {
        g.epilogue = e == 0 ? Epilogue::kNone : Epilogue::kBiasGelu;
        const auto t0 = std::chrono::steady_clock::now();
        const zdp::Status st = gemm->run(g, nullptr);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!st.ok()) {
          std::fprintf(stderr, "gemm_bench: %s\n", st.to_string().c_str());
          return 1;
        }
        if (round > 0) best[e] = std::min(best[e], sec);
      }
    }
    const double gf = s.flops() / best[0] / 1e9, gf_epi = s.flops() / best[1] / 1e9;
    best_overall = std::max(best_overall, gf);
    std::printf("%-8s %6lld %6lld %6lld %2s%2s %12.1f %18.1f %11.1f%%\n", s.name, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), zdp::kernels::to_string(s.ta),
                zdp::kernels::to_string(s.tb), gf, gf_epi, 100.0 * (best[1] - best[0]) / best[0]);
  }
  std::printf("\nsummary: cpu OpenBLAS sgemm best %.1f GFLOP/s at transformer shapes (d=%lld, T=%lld)\n",
              best_overall, static_cast<long long>(d), static_cast<long long>(tokens));
  return 0;
}
