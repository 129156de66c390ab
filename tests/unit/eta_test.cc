// The whole run's ETA (trainer/loop/eta.h): the steps left at the mean step time (the
// first step left out), plus the evaluations and saves still due at their measured means.
#include "trainer/loop/eta.h"

#include <gtest/gtest.h>

namespace zdp::trainer {
namespace {

Config schedule(int64_t steps, int64_t eval_every, int64_t save_every, bool saves) {
  Config c;
  c.train.steps = steps;
  c.train.eval_every = eval_every;
  c.checkpoint.every_steps = save_every;
  c.checkpoint.dir = saves ? "ckpt" : "";
  return c;
}

TEST(Eta, CountsTheEvaluationsAndSavesStillDue) {
  const EtaEstimator e(schedule(100, 30, 25, true), true);
  EXPECT_EQ(e.evals_left(0), 4);   // 30, 60, 90 and the last, 100
  EXPECT_EQ(e.evals_left(60), 2);  // 90, 100
  EXPECT_EQ(e.evals_left(100), 0);
  EXPECT_EQ(e.saves_left(0), 4);   // 25, 50, 75, 100 (the last is one of them)
  EXPECT_EQ(e.saves_left(75), 1);
  const EtaEstimator none(schedule(100, 0, 0, false), false);
  EXPECT_EQ(none.evals_left(0), 0);
  EXPECT_EQ(none.saves_left(0), 0);
  const EtaEstimator last_only(schedule(100, 0, 0, true), true);
  EXPECT_EQ(last_only.evals_left(10), 1);
  EXPECT_EQ(last_only.saves_left(10), 1);
}

TEST(Eta, StepsEvaluationsAndSavesAsMeasured) {
  EtaEstimator e(schedule(10, 5, 0, true), true);
  EXPECT_EQ(e.eta_s(0), -1);  // nothing timed yet
  e.step_done(9.0);           // the first step: left out once others are timed
  EXPECT_DOUBLE_EQ(e.eta_s(1), 9 * 9.0);
  e.step_done(1.0);
  e.step_done(3.0);
  // 7 steps at 2 s; evaluations and saves not measured yet count as nothing.
  EXPECT_DOUBLE_EQ(e.eta_s(3), 14);
  e.eval_done(4.0);
  e.save_done(0.5);
  // + 2 evaluations (5 and 10) at 4 s + 1 save (10) at 0.5 s.
  EXPECT_DOUBLE_EQ(e.eta_s(3), 14 + 8 + 0.5);
  EXPECT_EQ(e.eta_s(10), 0);
  // The step line comes before its step's evaluation and save: they count while pending.
  EXPECT_DOUBLE_EQ(e.eta_s(5, true), 5 * 2.0 + 2 * 4.0 + 0.5);  // 5 steps, evaluations 5 and 10, save 10
  EXPECT_DOUBLE_EQ(e.eta_s(6, true), 4 * 2.0 + 4.0 + 0.5);      // nothing due at 6
  EXPECT_DOUBLE_EQ(e.eta_s(10, true), 4.0 + 0.5);               // the last step: the final evaluation and save
}

}  // namespace
}  // namespace zdp::trainer
