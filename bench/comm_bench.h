// What the two halves of comm_bench share (comm_bench.cc: Gloo on CPU ranks;
// comm_bench_nccl.cc: NCCL on GPU ranks): options, nccl-tests' size and bus-bandwidth
// definitions, the predictable inputs, timing, and one table row per measurement.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::bench {

struct CommBenchOptions {
  std::vector<int> ranks = {2, 4};  // Gloo worlds
  std::vector<int> nccl_ranks;      // NCCL worlds; empty: every visible GPU (when there are any)
  std::string backends = "all";     // "gloo", "nccl" or "all" (nccl only where GPUs exist)
  int64_t min_bytes = 1 << 20;
  int64_t max_bytes = 64 << 20;
  int64_t nccl_max_bytes = int64_t{1} << 30;  // NCCL's sweep ends here (1 GiB, as nccl-tests)
  int iters = 5;
  int warmup = 1;
  int rounds = 3;
  std::vector<std::string> ops = {"reduce_scatter", "all_gather", "all_reduce"};
};

// nccl-tests' busbw factor: 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather.
inline double bus_factor(const std::string& op, int k) {
  return op == "all_reduce" ? 2.0 * (k - 1) / k : static_cast<double>(k - 1) / k;
}

// Predictable inputs: rank r, element i -> (r + 1) * (i % 5 + 1); small integers, so
// sums are exact and the expected values are closed-form.
inline void fill(std::vector<float>& v, int rank, int64_t offset = 0) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((rank + 1) * ((offset + static_cast<int64_t>(i)) % 5 + 1));
}
inline float summed(int world, int64_t index) { return static_cast<float>(world * (world + 1) / 2 * (index % 5 + 1)); }

// One rank's call for a buffer of `total` fp32 elements on `world` ranks: slice = total /
// world; an all-gather takes a slice in and gives world slices out, a reduce-scatter the
// reverse, an all-reduce `total` both ways. A total the world does not divide (3, 5, 6, 7
// ranks) leaves its last elements out of the sliced collectives: the all-gather's output
// is world slices, not `total` (sized so, NCCL's check found its tail still poisoned).
struct CollectiveShape {
  int64_t slice = 0, in = 0, out = 0;
};
inline CollectiveShape collective_shape(const std::string& op, int64_t total, int world) {
  const int64_t slice = world > 0 ? total / world : 0;
  if (op == "all_gather") return {slice, slice, slice * world};
  if (op == "reduce_scatter") return {slice, slice * world, slice};
  return {slice, total, total};
}

struct Measurement {
  double us = 1e300;  // per collective, the best round's
  int64_t wrong = 0;
  bool checked = true;  // false: the raw library's result is not where it can be checked
  double host_us = 0;   // NCCL: the host's time to issue one call (enqueue overhead)
};

// zdp and the raw library alternate for `rounds` rounds and each keeps its best round: on
// a shared machine the noise is one-sided (interference only slows), so the minimum is
// the stable estimate, and alternating exposes both to the same conditions.
template <typename Z, typename R>
void time_side_by_side(const CommBenchOptions& o, Z&& zdp_round, R&& raw_round, Measurement& z, Measurement& r) {
  for (int round = 0; round < o.rounds; ++round) {
    z.us = std::min(z.us, zdp_round());
    r.us = std::min(r.us, raw_round());
  }
}

inline void print_header(const char* what, int world, const CommBenchOptions& o) {
  std::printf("# comm_bench: %s, %d ranks, fp32, warm-up %d, %d timed iterations, best of %d alternating rounds\n",
              what, world, o.warmup, o.iters, o.rounds);
  std::printf("#%10s %11s %-15s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s\n", "size", "count", "op", "zdp us",
              "algbw", "busbw", "#wrong", "raw us", "algbw", "busbw", "#wrong", "zdp/raw");
  std::printf("#%10s %11s %-15s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s\n", "(B)", "(elements)", "", "",
              "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)", "", "speed");
}

// One row; zdp/raw is raw time over zdp time (the busbw ratio, also for one rank, whose
// busbw factor is 0).
inline void print_row(int64_t size, int64_t count, const std::string& op, int world, const Measurement& z,
                      const Measurement& r) {
  const double bytes = static_cast<double>(size);
  const double zalg = bytes / z.us / 1e3, ralg = bytes / r.us / 1e3;  // GB/s
  const double f = bus_factor(op, world);
  const std::string rwrong = r.checked ? std::to_string(r.wrong) : "n/a";
  std::printf(" %10lld %11lld %-15s | %10.1f %8.3f %8.3f %6lld | %10.1f %8.3f %8.3f %6s | %7.3f\n",
              static_cast<long long>(size), static_cast<long long>(count), op.c_str(), z.us, zalg, zalg * f,
              static_cast<long long>(z.wrong), r.us, ralg, ralg * f, rwrong.c_str(), r.us / z.us);
  std::fflush(stdout);
}

inline Status wrong_results(const std::string& op, int64_t size, const Measurement& z, const Measurement& r) {
  if (z.wrong == 0 && (r.wrong == 0 || !r.checked)) return Status::Ok();
  return Status(StatusCode::kInternal, op + " of " + std::to_string(size) + " bytes: wrong results (zdp " +
                                           std::to_string(z.wrong) + ", raw " + std::to_string(r.wrong) + ")");
}

// One GPU rank of the NCCL half (comm_bench_nccl.cc; kUnavailable without NCCL).
Status nccl_bench_rank(const CommBenchOptions& o, int rank, int world, Store& store);

}  // namespace zdp::bench
