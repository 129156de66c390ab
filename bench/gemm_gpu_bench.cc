// cuBLASLt benchmark through kernels/gemm.h: TFLOP/s at the GEMM shapes of a transformer
// layer (forward and the two backward products), bf16 in with fp32 accumulation, plain and
// with the fused bias+GELU epilogue side by side; then a block's residual add, in the
// GEMM (beta * C read from the residual, GemmArgs::c_in) against the GEMM and the add
// kernel after it, at GPT-2 small's output projections.
//
//   gemm_gpu_bench [--d 4096] [--tokens 8192] [--iters 20] [--rounds 3]
//                  [--residual-d 768] [--residual-tokens 16384]
//
// Shapes: a layer's forward and backward products (bench/gemm_shapes.h); the residual's
// at --residual-d over --residual-tokens (gpt2-124m's micro-batch of 16 x 1024 tokens).
// TFLOP/s = 2 m n k / time, best of --rounds, each round --iters back-to-back launches
// between CUDA events; the variants of a shape alternate within each round.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/gemm_shapes.h"
#include "bench/gpu_timing.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace {

using zdp::DType;
using zdp::bench::GemmShape;
using zdp::kernels::Epilogue;
using zdp::kernels::GemmArgs;

#define CHECK_CUDA(call) ZDP_BENCH_CHECK_CUDA("gemm_gpu_bench", call)

// A body's failure ends the benchmark with its message.
void run_or_exit(const zdp::Status& st) {
  if (st.ok()) return;
  std::fprintf(stderr, "gemm_gpu_bench: %s\n", st.to_string().c_str());
  std::exit(1);
}

// A block's output projection with the residual added: y = x W^T + b + residual, row-major
// [tokens, d] out of [tokens, in]. "separate" is the GEMM into a temporary and the add
// kernel (reads both, writes the sum); "in GEMM" passes the residual as c_in (beta = 1), as
// Ops::linear does for fc proj. Prints both times and their ratio; returns in GEMM /
// separate.
double residual_row(const char* name, zdp::kernels::Gemm& lt, int64_t d, int64_t in, int64_t tokens, int iters,
                    int rounds, cudaStream_t stream, const void* w, const void* x, const void* bias, const void* residual,
                    void* tmp, void* out) {
  GemmArgs g;  // as Ops::linear: m = out, n = rows, k = in, A = W transposed
  g.a.trans = zdp::kernels::Transpose::kYes;
  g.m = d, g.n = tokens, g.k = in;
  g.a.data = w, g.a.ld = in;
  g.b.data = x, g.b.ld = in;
  g.ab_dtype = DType::kBF16, g.c_dtype = DType::kBF16;
  g.epilogue = Epilogue::kBias, g.bias = bias;
  GemmArgs fused = g;
  fused.c.data = out, fused.c.ld = d, fused.c_in = residual, fused.beta = 1.0f;
  GemmArgs plain = g;
  plain.c.data = tmp, plain.c.ld = d;
  zdp::kernels::AddArgs add;
  add.count = d * tokens, add.dtype = DType::kBF16, add.a = residual, add.b = tmp, add.out = out;
  const std::vector<std::function<void()>> bodies = {[&] {
                                                       run_or_exit(lt.run(plain, stream));
                                                       run_or_exit(zdp::kernels::add_cuda(add, stream));
                                                     },
                                                     [&] { run_or_exit(lt.run(fused, stream)); }};
  const std::vector<double> t = zdp::bench::best_seconds_per_call("gemm_gpu_bench", bodies, iters, rounds, stream);
  std::printf("%-8s %6lld %6lld %6lld %14.1f %14.1f %8.3f\n", name, static_cast<long long>(d),
              static_cast<long long>(tokens), static_cast<long long>(in), t[0] * 1e6, t[1] * 1e6, t[1] / t[0]);
  return t[1] / t[0];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t d = 4096, tokens = 8192;
  int64_t residual_d = 768, residual_tokens = 16384;
  int iters = 20, rounds = 3;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {  // a flag without its value (or --help) is not ignored
      std::fprintf(stderr, "gemm_gpu_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i];
    if (flag == "--d") d = std::atoll(argv[i + 1]);
    else if (flag == "--tokens") tokens = std::atoll(argv[i + 1]);
    else if (flag == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--residual-d") residual_d = std::atoll(argv[i + 1]);
    else if (flag == "--residual-tokens") residual_tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: gemm_gpu_bench [--d 4096] [--tokens 8192] [--iters 20] [--rounds 3] [--residual-d 768] "
                   "[--residual-tokens 16384]\n");
      return 2;
    }
  }
  if (d <= 0 || tokens <= 0 || residual_d <= 0 || residual_tokens <= 0) {
    std::fprintf(stderr, "gemm_gpu_bench: --d, --tokens, --residual-d and --residual-tokens must be positive\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::vector<GemmShape> shapes = zdp::bench::transformer_layer_shapes(d, tokens);
  // The residual rows' largest inputs: fc proj's x (tokens x 4d) and W (d x 4d).
  int64_t max_elems = 4 * residual_d * std::max(residual_d, residual_tokens);
  for (const GemmShape& s : shapes) max_elems = std::max({max_elems, s.m * s.k, s.k * s.n, s.m * s.n});
  const int64_t bias_elems = 4 * std::max(d, residual_d), rows_elems = residual_d * residual_tokens;
  void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr, *ws = nullptr, *f32 = nullptr;
  void *residual = nullptr, *tmp = nullptr;
  CHECK_CUDA(cudaMalloc(&a, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&b, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&c, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&bias, bias_elems * 2));
  CHECK_CUDA(cudaMalloc(&residual, rows_elems * 2));
  CHECK_CUDA(cudaMalloc(&tmp, rows_elems * 2));
  CHECK_CUDA(cudaMalloc(&ws, zdp::kernels::kGemmWorkspaceBytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {  // small non-zero inputs: fp32 ones of a pattern, cast to bf16
    std::vector<float> host(static_cast<size_t>(max_elems));
    for (size_t i = 0; i < host.size(); ++i) host[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    CHECK_CUDA(cudaMalloc(&f32, max_elems * 4));
    CHECK_CUDA(cudaMemcpy(f32, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    for (void* dst : {a, b, bias, residual}) {
      zdp::kernels::CastArgs cast;
      cast.src = f32, cast.src_dtype = DType::kF32, cast.dst = dst, cast.dst_dtype = DType::kBF16;
      cast.count = dst == bias ? bias_elems : dst == residual ? rows_elems : max_elems;
      if (!zdp::kernels::cast_cuda(cast, stream).ok()) return 1;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  auto lt = zdp::kernels::make_cublaslt_gemm(ws, zdp::kernels::kGemmWorkspaceBytes);
  if (!lt.ok()) {
    std::fprintf(stderr, "gemm_gpu_bench: %s\n", lt.status().to_string().c_str());
    return 1;
  }
  std::printf("gemm_gpu_bench: %s, cuBLASLt bf16 -> bf16, fp32 accumulate, d = %lld, tokens = %lld\n\n", prop.name,
              static_cast<long long>(d), static_cast<long long>(tokens));
  std::printf("%-8s %6s %6s %6s %4s %10s %20s\n", "layer", "m", "n", "k", "op", "TFLOP/s", "+bias+gelu TFLOP/s");
  double best_overall = 0;
  for (const GemmShape& s : shapes) {
    GemmArgs g;
    g.a.trans = s.ta, g.b.trans = s.tb, g.m = s.m, g.n = s.n, g.k = s.k;
    g.a.data = a, g.a.ld = s.a_rows();
    g.b.data = b, g.b.ld = s.b_rows();
    g.c.data = c, g.c.ld = s.m;
    g.ab_dtype = DType::kBF16, g.c_dtype = DType::kBF16, g.bias = bias;
    GemmArgs gelu = g;
    gelu.epilogue = Epilogue::kBiasGelu;
    zdp::kernels::Gemm& gemm = **lt;
    const std::vector<std::function<void()>> bodies = {[&] { run_or_exit(gemm.run(g, stream)); },
                                                       [&] { run_or_exit(gemm.run(gelu, stream)); }};
    const std::vector<double> best = zdp::bench::best_seconds_per_call("gemm_gpu_bench", bodies, iters, rounds, stream);
    const double flops = s.flops();
    best_overall = std::max(best_overall, flops / best[0] / 1e12);
    std::printf("%-8s %6lld %6lld %6lld %2s%2s %10.1f %20.1f\n", s.name, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), zdp::kernels::to_string(s.ta),
                zdp::kernels::to_string(s.tb), flops / best[0] / 1e12, flops / best[1] / 1e12);
  }

  std::printf("\nresidual add after an output projection, d = %lld, tokens = %lld (us a call; ratio = in GEMM / "
              "separate):\n",
              static_cast<long long>(residual_d), static_cast<long long>(residual_tokens));
  std::printf("%-8s %6s %6s %6s %14s %14s %8s\n", "layer", "out", "tokens", "in", "GEMM + add", "in GEMM", "ratio");
  const double attn_proj = residual_row("proj", **lt, residual_d, residual_d, residual_tokens, iters, rounds, stream, a,
                                        b, bias, residual, tmp, c);
  const double fc_proj = residual_row("fc2", **lt, residual_d, 4 * residual_d, residual_tokens, iters, rounds, stream,
                                      a, b, bias, residual, tmp, c);
  std::printf("\nsummary: gpu cuBLASLt bf16 best %.0f TFLOP/s at transformer shapes (d=%lld, T=%lld); residual in "
              "GEMM / GEMM + add: fc2 %.3f, proj %.3f (d=%lld, T=%lld)\n",
              best_overall, static_cast<long long>(d), static_cast<long long>(tokens), fc_proj, attn_proj,
              static_cast<long long>(residual_d), static_cast<long long>(residual_tokens));
  return 0;
}
