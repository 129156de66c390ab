// What the tests that compare engine runs share (engine_equivalence_test,
// engine_precision_test, engine_checkpoint_test, the GPU ranks' tests): the options of the
// compared jobs, the tolerance between runs that group the gradient sums differently, a
// run whose rank failures fail the calling test, and GPU ranks against CPU ranks.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "testing/engine_runs.h"

namespace zdp::testing {

// Tolerance of the fp32 comparisons between runs of comparison_options() jobs that differ
// only in how the gradient sums are grouped (over ranks, micro-batches, the ring's order).
// A gradient element is a sum of <= 24 per-sample terms; regrouping changes it by at most
// n * u * sum|terms| (u = 2^-24), a relative 1.4e-6 of the magnitudes, and AdamW's step
// (lr = 1e-2) by about as much relative: ~1e-8 absolute per step. Over 20 steps of a
// smooth model that stays at the fp32 resolution of the parameters themselves (|p| < 2:
// an ulp is <= 2.4e-7); the runs differ by 0.9e-7 to 1.8e-7, about an ulp. 2e-6 allows
// ~10 ulps. Real bugs are four orders larger: a lost 1/K moves parameters by 1e-2 (with
// eps = 1e-3, the step depends on the gradient's scale), a wrong slice or a lost bucket
// by O(lr).
inline constexpr double kRegroupingTol = 2e-6;

// fp32, small buckets, AdamW at lr 1e-2 with weight decay, no clipping. eps = 1e-3: AdamW
// is invariant to the gradient's scale but for eps, and an eps near the gradients' size
// (|g| ~ 1e-3..1e-1 here) makes a wrongly scaled gradient (a lost 1/K) change the updates,
// so the comparisons see it.
inline EngineOptions comparison_options(int stage) {
  EngineOptions o;
  o.zero.stage = stage;
  o.zero.bucket_mb = 200.0 * 4 / (1 << 20);  // ~200 fp32 elements: 4-5 buckets, parameters straddle them
  o.optim.lr = 1e-2;
  o.optim.weight_decay = 0.01;
  o.optim.grad_clip = 0.0;
  o.optim.eps = 1e-3;
  o.seed = 7;
  return o;
}

// `steps` steps of TinyMlp on `world` ranks; a failing rank fails the test, naming the job.
inline EngineRunResult run_expecting_success(int world, const EngineOptions& o, int steps = 20) {
  EngineRun r;
  r.world = world;
  r.options = o;
  r.steps = steps;
  EngineRunResult result = run_engine(r);
  EXPECT_EQ(result.failures, "") << "world " << world << " stage " << o.zero.stage << " compute "
                                 << to_string(o.compute_dtype) << " reduce " << to_string(o.zero.reduce_dtype);
  return result;
}

// The job on 2 CPU ranks (Gloo) and on 2 GPU ranks (run.cuda; with run.comm_factory's
// communicator, else Gloo over CUDA buffers), equal bit for bit: the masters, and every
// rank's gradient norms, skipped steps and loss scales. The GPU ranks' results in
// `gpu_result` where given.
inline void expect_gpu_ranks_match_cpu_ranks(EngineRun run, const std::string& what, EngineRunResult* gpu_result = nullptr) {
  run.world = 2;
  EngineRun on_cpu = run;
  on_cpu.cuda = false;
  on_cpu.comm_factory = nullptr;
  const EngineRunResult cpu = run_engine(on_cpu);
  ASSERT_EQ(cpu.failures, "") << what << " on 2 CPU ranks";
  run.cuda = true;
  const EngineRunResult gpu = run_engine(run);
  ASSERT_EQ(gpu.failures, "") << what << " on 2 GPU ranks";
  ASSERT_EQ(gpu.masters.size(), cpu.masters.size()) << what;
  for (size_t p = 0; p < cpu.masters.size(); ++p) {
    ASSERT_EQ(gpu.masters[p].size(), cpu.masters[p].size());
    for (size_t i = 0; i < cpu.masters[p].size(); ++i) {
      ASSERT_EQ(std::memcmp(&gpu.masters[p][i], &cpu.masters[p][i], sizeof(float)), 0)
          << what << ": parameter #" << p << " element " << i << ": GPU ranks " << gpu.masters[p][i] << ", CPU ranks "
          << cpu.masters[p][i];
    }
  }
  for (size_t r = 0; r < gpu.stats_by_rank.size(); ++r) {
    ASSERT_EQ(gpu.stats_by_rank[r].size(), cpu.stats_by_rank[r].size());
    for (size_t s = 0; s < gpu.stats_by_rank[r].size(); ++s) {
      EXPECT_EQ(gpu.stats_by_rank[r][s].grad_norm, cpu.stats_by_rank[r][s].grad_norm)
          << what << ": rank " << r << ", step " << s;
      EXPECT_EQ(gpu.stats_by_rank[r][s].skipped, cpu.stats_by_rank[r][s].skipped) << what << ": rank " << r << ", step " << s;
      EXPECT_EQ(gpu.stats_by_rank[r][s].loss_scale, cpu.stats_by_rank[r][s].loss_scale)
          << what << ": rank " << r << ", step " << s;
    }
  }
  if (gpu_result != nullptr) *gpu_result = gpu;
}

}  // namespace zdp::testing
