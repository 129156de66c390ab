// ProgressReporter (progress_report.h).
#include "trainer/loop/progress_report.h"

#include "zdp/log.h"

namespace zdp::trainer {

ProgressReporter::ProgressReporter(Context& ctx, const JobProgress& start) : ctx_(ctx), job_(start) {
  mine_.step = start.step;
}

void ProgressReporter::step(const JobProgress& job, double compute_s) {
  const bool phase_ended = job_.phase != "train";  // back from an evaluation or a save: say so now
  job_ = job;
  job_.phase = "train";
  // A moving mean: a straggler shows within a few steps, and one slow step does not flag a rank.
  mine_.compute_s = mine_.compute_s == 0 ? compute_s : 0.7 * mine_.compute_s + 0.3 * compute_s;
  mine_.step = job.step;
  mine_.phase = "train";
  publish(phase_ended || job.step >= job.steps);
}

void ProgressReporter::phase(const std::string& phase) {
  job_.phase = phase;
  mine_.phase = phase;
  publish(true);
}

void ProgressReporter::publish(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < kInterval) return;
  last_ = now;
  Status s = ctx_.store().set(job_keys::rank_progress(ctx_.rank()), encode_progress(mine_));
  if (s.ok() && ctx_.rank() == 0) s = ctx_.store().set(job_keys::kProgress, encode_progress(job_));
  if (!s.ok() && !warned_) {
    warned_ = true;
    ZDP_LOG(kWarn) << "progress records for dp-launch could not be written (the run goes on): " << s.message();
  }
}

}  // namespace zdp::trainer
