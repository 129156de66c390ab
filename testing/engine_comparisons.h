// What the tests that compare engine runs share (engine_equivalence_test,
// engine_precision_test, engine_checkpoint_test): the options of the compared jobs, the
// tolerance between runs that group the gradient sums differently, and a run whose rank
// failures fail the calling test.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace zdp::testing
