// dp-train's training loop, on top of zdp::init's Context: builds the engine from the
// config (with the batch-size LR rule applied), the model and the data, then runs
// train.steps optimizer steps of accum_steps micro-batches each, evaluating the
// held-out split every train.eval_every steps and after the last one.
#pragma once

#include <cstdio>
#include <utility>
#include <vector>

#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::trainer {

struct TrainOptions {
  std::FILE* out = stdout;  // rank 0's console
};

struct TrainSummary {
  std::vector<double> losses;                        // per step: mean loss over the global batch
  std::vector<std::pair<int64_t, double>> evals;     // (step, held-out mean loss)
  int64_t params = 0;
  double seconds = 0;
};

// The engine options of `config` for `world_size` ranks: EngineOptions::from, then lr and
// min_lr scaled by optim.lr_scaling from optim.base_batch to train.global_batch.
StatusOr<EngineOptions> engine_options(const Config& config, int world_size);

// Every rank calls it. Errors name the rank and what failed.
StatusOr<TrainSummary> train(Context& ctx, const Config& config, const TrainOptions& options = {});

}  // namespace zdp::trainer
