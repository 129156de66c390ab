// dp-train's training loop, on top of zdp::init's Context: builds the engine from the
// config (EngineOptions::from applies the batch-size LR rule, once), the model and the
// data, then runs train.steps optimizer steps of accum_steps micro-batches each,
// evaluating the held-out split after the last step and, with train.eval_every > 0,
// before a fresh run's first step and every train.eval_every steps. With
// [checkpoint] it resumes from a checkpoint and saves one every checkpoint.every_steps
// steps and after the last (checkpointing.h).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/loop/loss_history.h"
#include "trainer/loop/train_fault.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::trainer {

struct TrainOptions {
  std::FILE* out = stdout;  // rank 0's console
  // Called on every rank at each phase of each step (steps count from 1): before the
  // first forward, before engine.step(), and after the step (before its checkpoint).
  // dp-train's fault injection ($ZDP_TRAIN_FAULT, train_fault.h) acts there.
  std::function<void(Context& ctx, int64_t step, TrainPhase phase)> at_phase = nullptr;
};

struct TrainSummary {
  int64_t first_step = 0;                            // steps already taken at the start (resumed)
  std::string resumed_from;                          // the checkpoint loaded; "" = from scratch
  std::vector<double> losses;                        // per step run (from first_step + 1): mean loss over the global batch
  std::vector<double> step_seconds;                  // per step on this rank, evaluation excluded
  std::vector<std::pair<int64_t, double>> evals;     // (step, held-out mean loss)
  LossHistory history;                               // the curve from step 1 (a resumed run's from its checkpoint)
  int64_t params = 0;
  int64_t tokens_per_sample = 0;                     // the model's (gpt: seq_len; mlp: 1)
  double peak_lr = 0;                                // optim.lr after optim.lr_scaling
  double seconds = 0;                                // the whole loop, evaluations included
  std::string param_sha256;                          // train.deterministic, rank 0: param_hash.h's
                                                     // digest after the last step; else ""
  std::string arithmetic_libraries;                  // train.deterministic: Ops::arithmetic_libraries(),
                                                     // the same on every rank; else ""
  int64_t optimizer_steps = -1;                      // updates taken from step 1 (skipped steps not
                                                     // counted) after the last step; -1: no step ran
  // Outputs asked for that could not be written (the profile, the kernel times): the run
  // itself succeeded, so the caller still writes its summary, then reports these.
  std::vector<Status> output_failures;
};

// Every rank calls it. Errors name the rank and what failed.
StatusOr<TrainSummary> train(Context& ctx, const Config& config, const TrainOptions& options = {});

}  // namespace zdp::trainer
