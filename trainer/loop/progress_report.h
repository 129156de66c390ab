// dp-train's side of the job's progress records (runtime/internal/job_progress.h): rank 0
// publishes the job record, every rank its own, through the job's store, so that
// dp-launch can draw its status line without reading the ranks' text. Steps publish at
// most once per kInterval (a store round trip a second, not one per step); a change of
// phase (evaluation, checkpoint, done) publishes at once. A failed write is not a failed
// run: the first one is logged and the rest are dropped silently.
#pragma once

#include <chrono>
#include <string>

#include "runtime/internal/job_progress.h"
#include "zdp/context.h"

namespace zdp::trainer {

class ProgressReporter {
 public:
  static constexpr std::chrono::milliseconds kInterval{500};

  // `start`: where the run starts (its step, train.steps).
  ProgressReporter(Context& ctx, const JobProgress& start);

  // After a step: `job` is rank 0's view (ignored elsewhere), `compute_s` this rank's
  // forward + backward time of the step.
  void step(const JobProgress& job, double compute_s);
  // Entering a phase ("eval", "checkpoint", "train", "done"): published now.
  void phase(const std::string& phase);

 private:
  void publish(bool force);

  Context& ctx_;
  JobProgress job_;
  RankProgress mine_;
  std::chrono::steady_clock::time_point last_ = {};
  bool warned_ = false;
};

}  // namespace zdp::trainer
