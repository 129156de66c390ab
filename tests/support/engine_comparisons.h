// What the tests that compare engine runs share (engine_equivalence_test,
// engine_precision_test): the options of the compared jobs and a run whose rank failures
// fail the calling test.
#pragma once

#include <gtest/gtest.h>

#include "support/engine_runs.h"

namespace zdp::testing {

// fp32, small buckets, AdamW at lr 1e-2 with weight decay, no clipping. eps = 1e-3: AdamW
// is invariant to the gradient's scale but for eps, and an eps near the gradients' size
// (|g| ~ 1e-3..1e-1 here) makes a wrongly scaled gradient (a lost 1/K) change the updates,
// so the comparisons see it.
inline EngineOptions comparison_options(int stage) {
  EngineOptions o;
  o.stage = stage;
  o.bucket_mb = 200.0 * 4 / (1 << 20);  // ~200 fp32 elements: 4-5 buckets, parameters straddle them
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
  EXPECT_EQ(result.failures, "") << "world " << world << " stage " << o.stage << " compute "
                                 << to_string(o.compute_dtype) << " reduce " << to_string(o.reduce_dtype);
  return result;
}

}  // namespace zdp::testing
