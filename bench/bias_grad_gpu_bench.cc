// GPT-2 124M's linear backward two ways, side by side in one run on one GPU (bf16, fp32
// accumulation, micro-batch 16 x 1024 tokens):
//   epilogues: the bias gradient summed by cuBLASLt's epilogues, BGRADB on the weight
//     gradient's GEMM and, for fc proj, DGELU_BGRAD on the input gradient's GEMM (GELU's
//     backward and fc's bias gradient in one GEMM);
//   kernels: plain GEMMs, then kernels/bias_grad.h (and for fc proj GELU's backward);
//   +dgelu (fc proj): GELU's backward in cuBLASLt's DGELU epilogue (no bias gradient),
//     the rest as kernels: the two ways trainer::Ops times at first use and picks from.
// Each layer's ms per call (best of --rounds, each --iters back-to-back calls between CUDA
// events) and the ratio epilogues / kernels. Random inputs (not zeros: those run faster).
//
//   bias_grad_gpu_bench [--tokens 16384] [--d 768] [--iters 20] [--rounds 3]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/gpu_timing.h"
#include "kernels/bias_grad.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace {

using zdp::DType;
using zdp::Status;
using zdp::kernels::Epilogue;
using zdp::kernels::GemmArgs;
using zdp::kernels::Transpose;

#define CHECK_CUDA(call) ZDP_BENCH_CHECK_CUDA("bias_grad_gpu_bench", call)

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "bias_grad_gpu_bench: %s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

// bf16 device memory holding uniform values in [-1, 1).
void* random_bf16(int64_t n, std::mt19937& rng, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : host) x = u(rng);
  void *f32 = nullptr, *out = nullptr;
  CHECK_CUDA(cudaMalloc(&f32, static_cast<size_t>(n) * 4));
  CHECK_CUDA(cudaMalloc(&out, static_cast<size_t>(n) * 2));
  CHECK_CUDA(cudaMemcpy(f32, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  check(zdp::kernels::cast_cuda({f32, DType::kF32, out, DType::kBF16, n}, stream), "cast");
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(f32));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 16384, d = 768;
  int iters = 20, rounds = 3;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {  // a flag without its value (or --help) is not ignored
      std::fprintf(stderr, "bias_grad_gpu_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i];
    if (flag == "--tokens") tokens = std::atoll(argv[i + 1]);
    else if (flag == "--d") d = std::atoll(argv[i + 1]);
    else if (flag == "--iters") iters = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: bias_grad_gpu_bench [--tokens 16384] [--d 768] [--iters 20] [--rounds 3]\n");
      return 2;
    }
  }
  if (tokens < 1 || tokens > (int64_t{1} << 24) || d < 1 || d > (int64_t{1} << 14)) {
    std::fprintf(stderr, "bias_grad_gpu_bench: --tokens must be in [1, 2^24] and --d in [1, 2^14] (got %lld, %lld)\n",
                 static_cast<long long>(tokens), static_cast<long long>(d));
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(1);
  const int64_t wide = 4 * d, big = tokens * wide;
  void* x = random_bf16(big, rng, stream);    // a layer's input [tokens, in]
  void* dy = random_bf16(big, rng, stream);   // its output's gradient [tokens, out]
  void* w = random_bf16(wide * wide, rng, stream);
  void* pre = random_bf16(big, rng, stream);  // fc's pre-activation
  void *dx = nullptr, *dw = nullptr, *db = nullptr, *dbias2 = nullptr, *ws = nullptr;
  float* partials = nullptr;
  CHECK_CUDA(cudaMalloc(&dx, static_cast<size_t>(big) * 2));
  CHECK_CUDA(cudaMalloc(&dw, static_cast<size_t>(wide * wide) * 2));
  CHECK_CUDA(cudaMalloc(&db, static_cast<size_t>(wide) * 2));
  CHECK_CUDA(cudaMalloc(&dbias2, static_cast<size_t>(wide) * 2));
  CHECK_CUDA(cudaMalloc(&partials, static_cast<size_t>(zdp::kernels::bias_grad_partials_floats(tokens, wide)) * 4));
  CHECK_CUDA(cudaMalloc(&ws, zdp::kernels::kGemmWorkspaceBytes));
  auto lt = zdp::kernels::make_cublaslt_gemm(ws, zdp::kernels::kGemmWorkspaceBytes);
  check(lt.status(), "cuBLASLt");

  // Ops::linear_backward's GEMMs for [tokens, in] -> [tokens, out] (trainer/models/ops.cc).
  auto dx_gemm = [&](int64_t in, int64_t out, Epilogue e) {
    GemmArgs g;
    g.m = in, g.n = tokens, g.k = out;
    g.a.data = w, g.a.ld = in;
    g.b.data = dy, g.b.ld = out;
    g.c.data = dx, g.c.ld = in;
    g.ab_dtype = g.c_dtype = DType::kBF16;
    g.epilogue = e;
    if (e == Epilogue::kDGeluBgrad || e == Epilogue::kDGelu) g.aux = pre, g.aux_ld = in;
    if (e == Epilogue::kDGeluBgrad) g.dbias = dbias2;
    check((*lt)->run(g, stream), "dx GEMM");
  };
  auto dw_gemm = [&](int64_t in, int64_t out, Epilogue e) {
    GemmArgs g;
    g.b.trans = Transpose::kYes;
    g.m = in, g.n = out, g.k = tokens;
    g.a.data = x, g.a.ld = in;
    g.b.data = dy, g.b.ld = out;
    g.c.data = dw, g.c.ld = in;
    g.ab_dtype = g.c_dtype = DType::kBF16;
    g.epilogue = e;
    if (e == Epilogue::kBgradB) g.dbias = db;
    check((*lt)->run(g, stream), "dW GEMM");
  };
  auto bias = [&](const void* grad, int64_t cols, void* out) {
    check(zdp::kernels::bias_grad_cuda({tokens, cols, DType::kBF16, grad, out, partials}, stream), "bias_grad");
  };
  struct Layer {
    const char* name;
    int64_t in, out;
    bool gelu;  // fc proj: its input gradient goes through GELU's backward to fc's bias
  };
  const Layer layers[] = {{"qkv", d, 3 * d, false}, {"attn proj", d, d, false}, {"fc proj", 4 * d, d, true}};
  // A layer's variants take turns within each round (gpu_timing.h), so clocks and heat
  // treat them alike; timed one after the other, the ratio drifted with them.
  auto time_ms = [&](const std::vector<std::function<void()>>& bodies) {
    std::vector<double> ms = zdp::bench::best_seconds_per_call("bias_grad_gpu_bench", bodies, iters, rounds, stream);
    for (double& m : ms) m *= 1e3;
    return ms;
  };
  std::printf("bias_grad_gpu_bench: %s, bf16, %lld tokens, d = %lld; ms per call of a layer's backward\n", prop.name,
              static_cast<long long>(tokens), static_cast<long long>(d));
  std::printf("%-10s %12s %12s %10s %12s\n", "layer", "epilogues", "kernels", "ratio", "+dgelu");
  double total_e = 0, total_k = 0, total_best = 0;
  for (const Layer& l : layers) {
    std::vector<std::function<void()>> bodies = {
        [&] {
          dx_gemm(l.in, l.out, l.gelu ? Epilogue::kDGeluBgrad : Epilogue::kNone);
          dw_gemm(l.in, l.out, Epilogue::kBgradB);
        },
        [&] {
          dx_gemm(l.in, l.out, Epilogue::kNone);
          if (l.gelu) {
            check(zdp::kernels::gelu_backward_cuda({tokens * l.in, DType::kBF16, pre, dx, dx}, stream), "gelu backward");
            bias(dx, l.in, dbias2);
          }
          dw_gemm(l.in, l.out, Epilogue::kNone);
          bias(dy, l.out, db);
        }};
    if (l.gelu) {
      bodies.push_back([&] {
        dx_gemm(l.in, l.out, Epilogue::kDGelu);
        bias(dx, l.in, dbias2);
        dw_gemm(l.in, l.out, Epilogue::kNone);
        bias(dy, l.out, db);
      });
    }
    const std::vector<double> ms = time_ms(bodies);
    const double e = ms[0], k = ms[1], dg = l.gelu ? ms[2] : k;
    if (l.gelu) {
      std::printf("%-10s %12.3f %12.3f %10.2f %12.3f\n", l.name, e, k, e / k, dg);
    } else {
      std::printf("%-10s %12.3f %12.3f %10.2f %12s\n", l.name, e, k, e / k, "-");
    }
    total_e += e, total_k += k, total_best += std::min(k, dg);
  }
  std::printf("summary: bias gradients by cuBLASLt epilogues %.3f ms, by plain GEMMs + bias_grad (+ GELU bwd) %.3f ms "
              "per layer's 3 linears: %.2fx; with the faster GELU backward (kernel or DGELU epilogue) %.3f ms\n",
              total_e, total_k, total_e / total_k, total_best);
  return 0;
}
