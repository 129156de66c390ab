// LR schedules (warm-up, constant, cosine and linear decay to a floor) and batch-size
// scaling rules: closed-form values at the points that define them, shape, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/lr_scaling.h"
#include "optim/schedule.h"

namespace zdp::optim {
namespace {

constexpr double kPeak = 3e-4;

LrSchedule schedule(LrDecay decay, int64_t warmup, int64_t total, double ratio) {
  LrSchedule s;
  s.decay = decay;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.final_lr_ratio = ratio;
  EXPECT_TRUE(s.validate().ok());
  return s;
}

TEST(LrSchedule, WarmupIsLinearFromPeakOverWarmup) {
  for (LrDecay d : {LrDecay::kConstant, LrDecay::kCosine, LrDecay::kLinear}) {
    const LrSchedule s = schedule(d, 100, 1000, 0.1);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 1), kPeak / 100);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 50), kPeak / 2);
    EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 100), kPeak);
  }
}

TEST(LrSchedule, ConstantStaysAtPeak) {
  const LrSchedule s = schedule(LrDecay::kConstant, 0, 0, 0.0);
  for (int64_t t : {1, 2, 1000, 1000000}) EXPECT_EQ(lr_at(s, kPeak, t), kPeak);
}

TEST(LrSchedule, CosineHitsMidpointAndFloor) {
  const LrSchedule s = schedule(LrDecay::kCosine, 100, 1100, 0.1);
  const double floor = 0.1 * kPeak;
  EXPECT_NEAR(lr_at(s, kPeak, 600), (kPeak + floor) / 2, 1e-15);   // progress 1/2
  EXPECT_NEAR(lr_at(s, kPeak, 350), floor + (kPeak - floor) * (1 + std::cos(std::acos(-1.0) / 4)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 1100), floor);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 5000), floor);
  double prev = kPeak;
  for (int64_t t = 101; t <= 1200; ++t) {  // never increases after warm-up
    const double lr = lr_at(s, kPeak, t);
    ASSERT_LE(lr, prev) << "t=" << t;
    prev = lr;
  }
}

TEST(LrSchedule, LinearDecaysToFloor) {
  const LrSchedule s = schedule(LrDecay::kLinear, 0, 400, 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 100), 0.75 * kPeak);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 200), 0.5 * kPeak);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 400), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, kPeak, 401), 0.0);
}

TEST(LrSchedule, RejectsInconsistentSettings) {
  LrSchedule s;
  s.decay = LrDecay::kCosine;
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

TEST(LrSchedule, ParsesNames) {
  EXPECT_EQ(parse_lr_decay("cosine").value(), LrDecay::kCosine);
  EXPECT_EQ(parse_lr_decay("linear").value(), LrDecay::kLinear);
  EXPECT_EQ(parse_lr_decay("constant").value(), LrDecay::kConstant);
  const auto bad = parse_lr_decay("cosin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("constant, cosine, linear"), std::string::npos);
}

TEST(LrScaling, FollowsTheGlobalBatch) {
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScaling::kNone, 256, 1024).value(), 1e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScaling::kLinear, 256, 1024).value(), 4e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScaling::kSqrt, 256, 1024).value(), 2e-3);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScaling::kLinear, 256, 64).value(), 2.5e-4);
  EXPECT_DOUBLE_EQ(scale_lr(1e-3, LrScaling::kSqrt, 256, 256).value(), 1e-3);  // at the base batch: unchanged
}

TEST(LrScaling, ParsesNamesAndRejectsBadBatches) {
  EXPECT_EQ(parse_lr_scaling("none").value(), LrScaling::kNone);
  EXPECT_EQ(parse_lr_scaling("linear").value(), LrScaling::kLinear);
  EXPECT_EQ(parse_lr_scaling("sqrt").value(), LrScaling::kSqrt);
  EXPECT_FALSE(parse_lr_scaling("log").ok());
  const auto bad = scale_lr(1e-3, LrScaling::kNone, 0, 64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("base_batch 0"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(scale_lr(-1.0, LrScaling::kLinear, 1, 1).ok());
  EXPECT_FALSE(scale_lr(1e-3, LrScaling::kSqrt, 8, -8).ok());
}

}  // namespace
}  // namespace zdp::optim
