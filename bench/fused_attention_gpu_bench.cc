// cuDNN's fused attention, plan by plan: every execution plan cuDNN builds for the forward
// and the backward graph of one shape (default gpt2-124m's micro-batch: 16 x 1024 tokens,
// 12 heads of 64, bf16), each timed side by side in this one run, with the plan zdp runs
// (the heuristics' first that builds) marked. The GPU check runs it: fused attention is
// gpt2-124m's largest region at about 22% of the bf16 peak (docs/gpu-notes.md), and
// whether another of cuDNN's plans is faster is a question only a GPU answers.
//
//   fused_attention_gpu_bench [--batch 16] [--seq 1024] [--heads 12] [--head-dim 64]
//                             [--iters 20] [--deterministic]
//
// Each plan runs once (a plan that fails is listed with why), then every plan that ran is
// timed by bench/gpu_timing.h: --iters back-to-back calls between two events, the best of 3
// rounds, the plans in turn within each round (the same clocks for all).
// FLOPs as the planner counts them (causal: half of the seq x seq products): forward
// 2 B H T^2 hd (Q K^T and P V), backward 2.5 times that (S recomputed, dP, dV, dK, dQ).
// The summary line: each pass's heuristic plan and the fastest, and their ratio
// (fastest / heuristic: below 1 means a plan zdp does not run is faster).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/gpu_timing.h"
#include "kernels/convert.h"
#include "kernels/fused_attention.h"

namespace {

using namespace zdp;

constexpr const char* kProgram = "fused_attention_gpu_bench";
constexpr int64_t kWorkspaceBytes = int64_t{1} << 30;  // a plan needing more is listed as such

void* device_bytes(int64_t bytes) {
  void* p = nullptr;
  ZDP_BENCH_CHECK_CUDA(kProgram, cudaMalloc(&p, static_cast<size_t>(bytes)));
  return p;
}

// n bf16 values uniform in [-1, 1] on the device.
void* device_random_bf16(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> host(static_cast<size_t>(n));
  for (uint16_t& x : host) x = kernels::f32_to_bf16(u(rng));
  void* p = device_bytes(n * 2);
  ZDP_BENCH_CHECK_CUDA(kProgram, cudaMemcpy(p, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  return p;
}

// One plan's outcome: its time, or why it did not run.
struct Timed {
  const kernels::FusedAttentionPlans::Plan* plan;
  double ms = -1;
  std::string why;
};

}  // namespace

int main(int argc, char** argv) {
  kernels::FusedAttentionShape s{16, 1024, 12, 64, DType::kBF16};
  int iters = 20;
  bool deterministic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--deterministic") deterministic = true;
    else if (flag == "--batch" && has_value) s.batch = std::atoll(argv[++i]);
    else if (flag == "--seq" && has_value) s.seq = std::atoll(argv[++i]);
    else if (flag == "--heads" && has_value) s.heads = std::atoll(argv[++i]);
    else if (flag == "--head-dim" && has_value) s.head_dim = std::atoll(argv[++i]);
    else if (flag == "--iters" && has_value) iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--batch 16] [--seq 1024] [--heads 12] [--head-dim 64] [--iters 20] [--deterministic]\n",
                   kProgram);
      return 2;
    }
  }
  const Status shape_ok = kernels::check_fused_attention_shape(s);
  if (!shape_ok.ok() || iters < 1 || iters > 10000) {
    std::fprintf(stderr, "%s: %s\n", kProgram, shape_ok.ok() ? "--iters must be 1..10000" : shape_ok.to_string().c_str());
    return 2;
  }
  const int64_t n = s.batch * s.seq, d = s.heads * s.head_dim;
  void* qkv = device_random_bf16(n * 3 * d, 1);
  void* dout = device_random_bf16(n * d, 2);
  void* out = device_bytes(n * d * 2);
  void* dqkv = device_bytes(n * 3 * d * 2);
  auto* stats = static_cast<float*>(device_bytes(s.batch * s.heads * s.seq * 4));
  void* workspace = device_bytes(kWorkspaceBytes);
  cudaStream_t stream = nullptr;
  ZDP_BENCH_CHECK_CUDA(kProgram, cudaStreamCreate(&stream));

  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const kernels::FusedAttentionArgs fwd{s, scale, qkv, out, stats};
  const kernels::FusedAttentionBackwardArgs bwd{s, scale, qkv, out, dout, stats, dqkv};
  StatusOr<std::unique_ptr<kernels::FusedAttentionPlans>> made = kernels::make_cudnn_attention_plans(fwd, bwd, deterministic);
  if (!made.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, made.status().to_string().c_str());
    return 1;
  }
  kernels::FusedAttentionPlans& plans = **made;
  // Each plan once: those that run are timed, side by side.
  std::vector<Timed> timed;
  std::vector<std::function<void()>> bodies;
  std::vector<size_t> body_of;  // timed[] index of each body
  for (const kernels::FusedAttentionPlans::Plan& p : plans.plans()) {
    Timed t{&p, -1, ""};
    if (p.workspace > kWorkspaceBytes) {
      t.why = "needs " + std::to_string(p.workspace) + " bytes of workspace";
    } else {
      const Status ran = plans.run(p, workspace, stream);
      const cudaError_t synced = cudaStreamSynchronize(stream);
      if (!ran.ok()) t.why = ran.to_string();
      else if (synced != cudaSuccess) t.why = cudaGetErrorString(synced);
    }
    if (t.why.empty()) {
      body_of.push_back(timed.size());
      bodies.push_back([&plans, &p, workspace, stream] {
        const Status ran = plans.run(p, workspace, stream);
        if (!ran.ok()) {
          std::fprintf(stderr, "%s: %s\n", kProgram, ran.to_string().c_str());
          std::exit(1);
        }
      });
    }
    timed.push_back(t);
  }
  const std::vector<double> seconds = bench::best_seconds_per_call(kProgram, bodies, iters, 3, stream, 0);
  for (size_t b = 0; b < bodies.size(); ++b) timed[body_of[b]].ms = seconds[b] * 1e3;

  const double fwd_flops = 2.0 * static_cast<double>(s.batch * s.heads) * static_cast<double>(s.seq * s.seq) * s.head_dim;
  const double pass_flops[2] = {fwd_flops, 2.5 * fwd_flops};
  std::printf("%s%s, the best of 3 rounds of %d back-to-back calls a plan\n", kernels::describe(s).c_str(),
              deterministic ? ", deterministic backward" : "", iters);
  std::printf("%-8s %5s %-6s %10s %9s  %s\n", "pass", "plan", "runs", "ms/call", "TFLOP/s", "cuDNN's name (or why it did not run)");
  const Timed* zdps[2] = {nullptr, nullptr};
  const Timed* fastest[2] = {nullptr, nullptr};
  for (const Timed& t : timed) {
    const int p = t.plan->backward ? 1 : 0;
    const char* pass = p ? "backward" : "forward";
    if (t.ms >= 0) {
      std::printf("%-8s %5lld %-6s %10.4f %9.1f  %s\n", pass, static_cast<long long>(t.plan->index),
                  t.plan->heuristic ? "zdp's" : "", t.ms, pass_flops[p] / (t.ms * 1e-3) / 1e12, t.plan->name.c_str());
      if (t.plan->heuristic) zdps[p] = &t;
      if (!fastest[p] || t.ms < fastest[p]->ms) fastest[p] = &t;
    } else {
      std::printf("%-8s %5lld %-6s %10s %9s  %s: %s\n", pass, static_cast<long long>(t.plan->index),
                  t.plan->heuristic ? "zdp's" : "", "-", "-", t.plan->name.c_str(), t.why.c_str());
    }
  }
  std::string summary;
  for (int p = 0; p < 2; ++p) {
    char line[512];
    if (!zdps[p]) {
      std::snprintf(line, sizeof line, "%s: zdp's plan did not run", p ? "backward" : "forward");
    } else {
      std::snprintf(line, sizeof line, "%s: zdp's %.3f ms (%.0f TFLOP/s), fastest %.3f ms (%s) = %.2fx",
                    p ? "backward" : "forward", zdps[p]->ms, pass_flops[p] / (zdps[p]->ms * 1e-3) / 1e12,
                    fastest[p]->ms, fastest[p]->plan->name.c_str(), fastest[p]->ms / zdps[p]->ms);
    }
    summary += (p ? "; " : "") + std::string(line);
  }
  std::printf("summary: %s\n", summary.c_str());
  for (void* p : {qkv, dout, out, dqkv, static_cast<void*>(stats), workspace}) cudaFree(p);
  cudaStreamDestroy(stream);
  return zdps[0] && zdps[1] ? 0 : 1;
}
