// How long the rest of a dp-train run will take: the steps left at the mean step time so
// far, plus the held-out evaluations and checkpoint saves still due, each at the mean of
// those measured so far (one not yet measured counts as nothing, so the ETA can grow
// once the first save has been timed). The console's bar, the step lines and dp-launch's
// status line all show this one estimate.
#pragma once

#include <cstdint>

#include "zdp/config.h"

namespace zdp::trainer {

class EtaEstimator {
 public:
  // `has_eval`: the run has held-out data (evaluations happen at all).
  EtaEstimator(const Config& config, bool has_eval);

  void step_done(double seconds);
  void eval_done(double seconds);
  void save_done(double seconds);

  // Seconds left after `done` of train.steps steps; 0 when done, -1 before any step was timed.
  // `work_at_done_pending`: the evaluation and save due at step `done` itself have not run
  // yet (the step line, printed before them), so they count too; the last step's ETA is
  // then the final evaluation and save, not 0.
  double eta_s(int64_t done, bool work_at_done_pending = false) const;
  // Evaluations and saves due after step `done` (the run's schedule: every eval_every /
  // checkpoint.every_steps steps and after the last one).
  int64_t evals_left(int64_t done) const;
  int64_t saves_left(int64_t done) const;

 private:
  int64_t steps_, eval_every_, save_every_;
  bool has_eval_, has_saves_;
  // The first step (allocation, warm caches) is left out of the mean when later ones exist.
  double first_step_s_ = -1, steps_s_ = 0;
  int64_t timed_steps_ = 0;
  double evals_s_ = 0, saves_s_ = 0;
  int64_t evals_ = 0, saves_ = 0;
};

}  // namespace zdp::trainer
