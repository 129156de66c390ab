// cuBLASLt benchmark through kernels/gemm.h: TFLOP/s at the GEMM shapes of a transformer
// layer (forward and the two backward products), bf16 in with fp32 accumulation, plain and
// with the fused bias+GELU epilogue side by side.
//
//   gemm_gpu_bench [--d 4096] [--tokens 8192] [--iters 20] [--rounds 3]
//
// Shapes: a layer's forward and backward products (bench/gemm_shapes.h).
// TFLOP/s = 2 m n k / time, best of --rounds, each round --iters back-to-back launches
// between CUDA events.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/gemm_shapes.h"
#include "kernels/cast.h"
#include "kernels/gemm.h"

namespace {

using zdp::DType;
using zdp::bench::GemmShape;
using zdp::kernels::Epilogue;
using zdp::kernels::GemmArgs;

#define CHECK_CUDA(call) ZDP_BENCH_CHECK_CUDA("gemm_gpu_bench", call)

}  // namespace

int main(int argc, char** argv) {
  int64_t d = 4096, tokens = 8192;
  int iters = 20, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--d") d = std::atoll(argv[i + 1]);
    else if (flag == "--tokens") tokens = std::atoll(argv[i + 1]);
    else if (flag == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: gemm_gpu_bench [--d 4096] [--tokens 8192] [--iters 20] [--rounds 3]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::vector<GemmShape> shapes = zdp::bench::transformer_layer_shapes(d, tokens);
  int64_t max_elems = 0;
  for (const GemmShape& s : shapes) max_elems = std::max({max_elems, s.m * s.k, s.k * s.n, s.m * s.n});
  void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr, *ws = nullptr, *f32 = nullptr;
  CHECK_CUDA(cudaMalloc(&a, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&b, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&c, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&bias, 4 * d * 2));
  CHECK_CUDA(cudaMalloc(&ws, zdp::kernels::kGemmWorkspaceBytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {  // small non-zero inputs: fp32 ones of a pattern, cast to bf16
    std::vector<float> host(static_cast<size_t>(max_elems));
    for (size_t i = 0; i < host.size(); ++i) host[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    CHECK_CUDA(cudaMalloc(&f32, max_elems * 4));
    CHECK_CUDA(cudaMemcpy(f32, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    for (void* dst : {a, b, bias}) {
      zdp::kernels::CastArgs cast;
      cast.src = f32, cast.src_dtype = DType::kF32, cast.dst = dst, cast.dst_dtype = DType::kBF16;
      cast.count = dst == bias ? 4 * d : max_elems;
      if (!zdp::kernels::cast_cuda(cast, stream).ok()) return 1;
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  auto lt = zdp::kernels::make_cublaslt_gemm(ws, zdp::kernels::kGemmWorkspaceBytes);
  if (!lt.ok()) {
    std::fprintf(stderr, "gemm_gpu_bench: %s\n", lt.status().to_string().c_str());
    return 1;
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
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
    double best[2] = {1e30, 1e30};
    for (int e = 0; e < 2; ++e) {
      g.epilogue = e == 0 ? Epilogue::kNone : Epilogue::kBiasGelu;
      const zdp::Status warm = (*lt)->run(g, stream);  // also builds and caches the plan
      if (!warm.ok()) {
        std::fprintf(stderr, "gemm_gpu_bench: %s\n", warm.to_string().c_str());
        return 1;
      }
    }
    for (int round = 0; round < rounds; ++round) {
      for (int e = 0; e < 2; ++e) {
        g.epilogue = e == 0 ? Epilogue::kNone : Epilogue::kBiasGelu;
        CHECK_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < iters; ++i) {
          if (!(*lt)->run(g, stream).ok()) return 1;
        }
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        best[e] = std::min(best[e], ms / 1e3 / iters);
      }
    }
    const double flops = s.flops();
    best_overall = std::max(best_overall, flops / best[0] / 1e12);
    std::printf("%-8s %6lld %6lld %6lld %2s%2s %10.1f %20.1f\n", s.name, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), zdp::kernels::to_string(s.ta),
                zdp::kernels::to_string(s.tb), flops / best[0] / 1e12, flops / best[1] / 1e12);
  }
  std::printf("\nsummary: gpu cuBLASLt bf16 best %.0f TFLOP/s at transformer shapes (d=%lld, T=%lld)\n", best_overall,
              static_cast<long long>(d), static_cast<long long>(tokens));
  return 0;
}
