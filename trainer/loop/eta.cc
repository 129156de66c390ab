// EtaEstimator (eta.h).
#include "trainer/loop/eta.h"


namespace zdp::trainer {
namespace {

// Multiples of `every` in (done, steps], plus `steps` itself when it is not one.
int64_t due_after(int64_t done, int64_t steps, int64_t every) {
  if (done >= steps) return 0;
  int64_t n = every > 0 ? steps / every - done / every : 0;
  if (every <= 0 || steps % every != 0) ++n;  // the one after the last step
  return n;
}

}  // namespace

EtaEstimator::EtaEstimator(const Config& config, bool has_eval)
    : steps_(config.train.steps),
      eval_every_(config.train.eval_every),
      save_every_(config.checkpoint.every_steps),
      has_eval_(has_eval),
      has_saves_(!config.checkpoint.dir.empty()) {}

void EtaEstimator::step_done(double seconds) {
  if (first_step_s_ < 0) {
    first_step_s_ = seconds;
    return;
  }
  steps_s_ += seconds;
  ++timed_steps_;
}

void EtaEstimator::eval_done(double seconds) {
  evals_s_ += seconds;
  ++evals_;
}

void EtaEstimator::save_done(double seconds) {
  saves_s_ += seconds;
  ++saves_;
}

int64_t EtaEstimator::evals_left(int64_t done) const { return has_eval_ ? due_after(done, steps_, eval_every_) : 0; }

int64_t EtaEstimator::saves_left(int64_t done) const { return has_saves_ ? due_after(done, steps_, save_every_) : 0; }

double EtaEstimator::eta_s(int64_t done, bool work_at_done_pending) const {
  // The work still due is what falls in (after, steps]: from step done + 1 on, or from
  // step done itself while its evaluation and save are pending.
  const int64_t after = work_at_done_pending && done > 0 ? done - 1 : done;
  if (after >= steps_) return 0;
  if (first_step_s_ < 0) return -1;
  const double per_step = timed_steps_ > 0 ? steps_s_ / static_cast<double>(timed_steps_) : first_step_s_;
  double eta = per_step * static_cast<double>(steps_ > done ? steps_ - done : 0);
  if (evals_ > 0) eta += evals_s_ / static_cast<double>(evals_) * static_cast<double>(evals_left(after));
  if (saves_ > 0) eta += saves_s_ / static_cast<double>(saves_) * static_cast<double>(saves_left(after));
  return eta;
}

}  // namespace zdp::trainer
