// The GPU benchmarks' timing loop: CUDA events around back-to-back calls, the best round.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "bench/cuda_check.h"

namespace zdp::bench {

// Seconds one call of each of `bodies` takes: `iters` back-to-back calls between two
// events on `stream`, the best of `rounds` rounds. Each round times every body in turn, so
// that the variants of a comparison see the same clocks (a card that heats up or caps its
// power slows them all alike). Each body runs `warmups` times first (cuBLASLt plans and
// first-use choices made outside the timing). A failing CUDA call exits 1 naming
// `program`; a body reports (and exits on) its own failures.
inline std::vector<double> best_seconds_per_call(const char* program, const std::vector<std::function<void()>>& bodies,
                                                 int iters, int rounds, cudaStream_t stream, int warmups = 1) {
  for (const auto& body : bodies) {
    for (int i = 0; i < warmups; ++i) body();
  }
  ZDP_BENCH_CHECK_CUDA(program, cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  ZDP_BENCH_CHECK_CUDA(program, cudaEventCreate(&start));
  ZDP_BENCH_CHECK_CUDA(program, cudaEventCreate(&stop));
  std::vector<double> best(bodies.size(), 1e30);
  for (int round = 0; round < rounds; ++round) {
    for (size_t v = 0; v < bodies.size(); ++v) {
      ZDP_BENCH_CHECK_CUDA(program, cudaEventRecord(start, stream));
      for (int i = 0; i < iters; ++i) bodies[v]();
      ZDP_BENCH_CHECK_CUDA(program, cudaEventRecord(stop, stream));
      ZDP_BENCH_CHECK_CUDA(program, cudaEventSynchronize(stop));
      float ms = 0;
      ZDP_BENCH_CHECK_CUDA(program, cudaEventElapsedTime(&ms, start, stop));
      best[v] = std::min(best[v], static_cast<double>(ms) / 1e3 / iters);
    }
  }
  ZDP_BENCH_CHECK_CUDA(program, cudaEventDestroy(start));
  ZDP_BENCH_CHECK_CUDA(program, cudaEventDestroy(stop));
  return best;
}

}  // namespace zdp::bench
