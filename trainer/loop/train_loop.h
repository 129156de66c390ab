// dp-train's training loop, on top of zdp::init's Context: builds the engine from the
// config (EngineOptions::from applies the batch-size LR rule, once), the model and the
// data, then runs train.steps optimizer steps of accum_steps micro-batches each,
// evaluating the held-out split every train.eval_every steps and after the last one.
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
  std::vector<double> step_seconds;                  // per step on this rank, evaluation excluded
  std::vector<std::pair<int64_t, double>> evals;     // (step, held-out mean loss)
  int64_t params = 0;
  int64_t tokens_per_sample = 0;                     // the model's (gpt: seq_len; mlp: 1)
  double peak_lr = 0;                                // optim.lr after optim.lr_scaling
  double seconds = 0;                                // the whole loop, evaluations included
};

// Every rank calls it. Errors name the rank and what failed.
StatusOr<TrainSummary> train(Context& ctx, const Config& config, const TrainOptions& options = {});

}  // namespace zdp::trainer
