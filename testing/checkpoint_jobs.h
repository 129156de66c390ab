// The checkpoint jobs of engine_checkpoint_test and engine_checkpoint_faults_test: the
// comparison jobs of engine_comparisons.h with a learning-rate schedule, their SGD
// variant, a two-step save, and a file's bytes.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "testing/engine_comparisons.h"

namespace zdp::testing::checkpoint_jobs {

inline constexpr int kSteps = 20;

// The comparison jobs' options (eps = 1e-3: AdamW's step then depends on m and v's
// scale, so a lost v shows) with a schedule: the learning rate moves every step, so a
// resumed step count must be the right one.
inline EngineOptions options(int stage) {
  EngineOptions o = comparison_options(stage);
  o.optim.schedule = LrSchedule::kCosine;
  o.optim.warmup_steps = 3;
  o.optim.min_lr = 1e-3;
  o.total_steps = kSteps;
  return o;
}

inline EngineRun job(int world, int stage) {
  EngineRun r;
  r.world = world;
  r.options = options(stage);
  r.steps = kSteps;
  r.save.chunk_bytes = 1024;  // several chunks per file, so ranks verify different ones
  return r;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// job() with SGD; momentum 0 keeps no optimizer state.
inline EngineRun sgd_job(int world, int stage, double momentum) {
  EngineRun r = job(world, stage);
  r.options.optim.name = OptimizerKind::kSgd;
  r.options.optim.beta1 = momentum;  // [optim] beta1 is SGD's momentum
  return r;
}

// Runs `run` for 2 steps saving step-2 under `root`; "" or the failures.
inline std::string save_step_2(EngineRun run, const std::string& root) {
  run.steps = 2;
  run.save_steps = {2};
  run.save_root = root;
  return run_engine(run).failures;
}

}  // namespace zdp::testing::checkpoint_jobs
