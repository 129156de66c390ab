// LR schedules (warm-up, constant, cosine and linear decay to a floor) and batch-size
// scaling rules: closed-form values at the points that define them, shape, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/lr_scaling.h"
#include "optim/schedule.h"
#include "zdp/config.h"

namespace zdp::optim {
namespace {

constexpr double kPeak = 3e-4;

Schedule schedule(LrSchedule decay, int64_t warmup, int64_t total, double ratio) {
  Schedule s;
  s.decay = decay;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.final_lr_ratio = ratio;
  EXPECT_TRUE(s.validate().ok());
  return s;
}

TEST(LrSchedule, WarmupIsLinearFromPeakOverWarmup) {
  for (LrSchedule d : {LrSchedule::kConstant, LrSchedule::kCosine, LrSchedule::kLinear}) {
    const Schedule s = schedule(d, 100, 1000, 0.1);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 1), kPeak / 100);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 50), kPeak / 2);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 100), kPeak);
  }
}

TEST(LrSchedule, ConstantStaysAtPeak) {
  const Schedule s = schedule(LrSchedule::kConstant, 0, 0, 0.0);
  for (int64_t t : {1, 2, 1000, 1000000}) EXPECT_EQ(lr_at(s, kPeak, t), kPeak);
}

// Progress (t - 1 - W) / (T - W): step t is llm.c's 0-based step t - 1, so the step after
// the warm-up is at the peak and the run's last step (t = T) is one step short of the
// floor. (With t - W the last step was the floor itself: 0 by default, a wasted step.)
TEST(LrSchedule, CosineHitsMidpointAndFloor) {
  const Schedule s = schedule(LrSchedule::kCosine, 100, 1100, 0.1);
  const double floor = 0.1 * kPeak;
  const double pi = std::acos(-1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 101), kPeak);                     // progress 0
  EXPECT_NEAR(lr_at(s, kPeak, 601), (kPeak + floor) / 2, 1e-15);   // progress 1/2
  EXPECT_NEAR(lr_at(s, kPeak, 351), floor + (kPeak - floor) * (1 + std::cos(pi / 4)) / 2, 1e-15);
  // llm.c's get_lr at its 0-based step 1099 of max_steps 1100: decay_ratio 999 / 1000.
  EXPECT_NEAR(lr_at(s, kPeak, 1100), floor + (kPeak - floor) * (1 + std::cos(pi * 0.999)) / 2, 1e-15);
  EXPECT_GT(lr_at(s, kPeak, 1100), floor);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 1101), floor);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 5000), floor);
  double prev = kPeak;
  for (int64_t t = 101; t <= 1200; ++t) {  // never increases after warm-up
    const double lr = lr_at(s, kPeak, t);
    ASSERT_LE(lr, prev) << "t=" << t;
    prev = lr;
  }
}

TEST(LrSchedule, LinearDecaysToFloor) {
  const Schedule s = schedule(LrSchedule::kLinear, 0, 400, 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 1), kPeak);  // no warm-up: the first step at the peak
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 101), 0.75 * kPeak);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 201), 0.5 * kPeak);
  EXPECT_NEAR(lr_at(s, kPeak, 400), kPeak / 400, 1e-18);  // the last step: one step of decay left
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 401), 0.0);
}

TEST(LrSchedule, RejectsInconsistentSettings) {
  Schedule s;
  s.decay = LrSchedule::kCosine;
  s.warmup_steps = 100;
  s.total_steps = 100;  // no room to decay
  Status st = s.validate();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("total_steps (100) > warmup_steps (100)"), std::string::npos) << st.message();
  s.total_steps = 200;
  s.final_lr_ratio = 1.5;
  EXPECT_EQ(s.validate().code(), StatusCode::kInvalidArgument);
  s.final_lr_ratio = 0.0;
  s.warmup_steps = -1;
  EXPECT_EQ(s.validate().code(), StatusCode::kInvalidArgument);
}

// The config's words are the optimizer's own (zdp/optim_config.h): the parser reads them
// from to_string(), so a word renamed there is renamed in TOML too.
TEST(LrSchedule, NamesAreTheConfigWords) {
  EXPECT_STREQ(to_string(LrSchedule::kCosine), "cosine");
  EXPECT_STREQ(to_string(LrSchedule::kLinear), "linear");
  EXPECT_STREQ(to_string(LrSchedule::kConstant), "constant");
  EXPECT_EQ(parse_config("[optim]\nschedule = \"linear\"\n", "t.toml").value().optim.schedule, LrSchedule::kLinear);
  const auto bad = parse_config("[optim]\nschedule = \"cosin\"\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"constant\", \"cosine\", \"linear\""), std::string::npos)
      << bad.status().message();
}

TEST(LrScaling, FollowsTheGlobalBatch) {
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScalingRule::kNone, 256, 1024).value(), 1e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScalingRule::kLinear, 256, 1024).value(), 4e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScalingRule::kSqrt, 256, 1024).value(), 2e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScalingRule::kLinear, 256, 64).value(), 2.5e-4);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScalingRule::kSqrt, 256, 256).value(), 1e-3);  // at the base batch: unchanged
}

TEST(LrScaling, NamesAreTheConfigWordsAndBadBatchesAreRejected) {
  EXPECT_STREQ(to_string(LrScalingRule::kNone), "none");
  EXPECT_STREQ(to_string(LrScalingRule::kLinear), "linear");
  EXPECT_STREQ(to_string(LrScalingRule::kSqrt), "sqrt");
  EXPECT_EQ(parse_config("[optim]\nlr_scaling = \"sqrt\"\n", "t.toml").value().optim.lr_scaling, LrScalingRule::kSqrt);
  EXPECT_FALSE(parse_config("[optim]\nlr_scaling = \"log\"\n", "t.toml").ok());
  const auto bad = scale_lr(1e-3, LrScalingRule::kNone, 0, 64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("base_batch 0"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(scale_lr(-1.0, LrScalingRule::kLinear, 1, 1).ok());
  EXPECT_FALSE(scale_lr(1e-3, LrScalingRule::kSqrt, 8, -8).ok());
}

}  // namespace
}  // namespace zdp::optim
