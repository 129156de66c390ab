// Global-norm clipping (PyTorch's coefficient), the per-step gradient scale with loss
// scaling and overflow, and dynamic loss scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "optim/clip.h"

namespace zdp::optim {
namespace {

TEST(Clip, CoefficientIsPyTorchs) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);  // below the limit: untouched
  EXPECT_DOUBLE_EQ(clip_coefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_coefficient(1.0, 1.0), 1.0 / (1.0 + 1e-6));  // just at the limit: the 1e-6
  EXPECT_EQ(clip_coefficient(1e9, 0.0), 1.0);                        // max_norm <= 0: off
  EXPECT_EQ(clip_coefficient(std::numeric_limits<double>::infinity(), 1.0), 0.0);
}

TEST(Clip, GradScaleCombinesUnscaleAndClip) {
  kernels::GradStats s;
  s.sum_sq = 1024.0f * 1024.0f * 9.0f;  // the scaled gradient's norm: 3 * 1024
  const GradScaleDecision d = decide_grad_scale(s, 1024.0, 1.0);
  EXPECT_EQ(d.action, StepAction::kApply);
  EXPECT_DOUBLE_EQ(d.grad_norm, 3.0);
  EXPECT_DOUBLE_EQ(d.clip_coef, 1.0 / (3.0 + 1e-6));
  EXPECT_FLOAT_EQ(d.grad_scale, static_cast<float>(1.0 / (3.0 + 1e-6) / 1024.0));
  const GradScaleDecision no_clip = decide_grad_scale(s, 1024.0, 0.0);
  EXPECT_FLOAT_EQ(no_clip.grad_scale, 1.0f / 1024.0f);
}

TEST(Clip, NonFiniteGradientsSkipTheStep) {
  kernels::GradStats s;
  s.sum_sq = 4.0f;
  s.nonfinite = 1.0f;  // e.g. 2 ranks all-reduced, one overflowed
  const GradScaleDecision d = decide_grad_scale(s, 65536.0, 1.0);
  EXPECT_EQ(d.action, StepAction::kSkipNonFinite);
  EXPECT_EQ(d.grad_scale, 0.0f);
  s.nonfinite = 0.0f;
  s.sum_sq = std::numeric_limits<float>::infinity();
  EXPECT_EQ(decide_grad_scale(s, 1.0, 1.0).action, StepAction::kSkipNonFinite);
}

TEST(DynamicLossScale, BacksOffOnOverflowAndGrowsAfterAnInterval) {
  DynamicLossScale::Options o;
  o.init_scale = 1024.0;
  o.growth_interval = 3;
  auto scale = DynamicLossScale::create(o);
  ASSERT_TRUE(scale.ok());
  DynamicLossScale& s = scale.value();
  s.update(StepAction::kApply);
  s.update(StepAction::kApply);
  EXPECT_EQ(s.scale(), 1024.0);
  s.update(StepAction::kApply);
  EXPECT_EQ(s.scale(), 2048.0);  // three finite steps in a row
  s.update(StepAction::kApply);
  s.update(StepAction::kSkipNonFinite);
  EXPECT_EQ(s.scale(), 1024.0);
  s.update(StepAction::kApply);
  s.update(StepAction::kApply);
  EXPECT_EQ(s.scale(), 1024.0);  // the overflow restarted the count
  s.update(StepAction::kApply);
  EXPECT_EQ(s.scale(), 2048.0);
  for (int i = 0; i < 40; ++i) s.update(StepAction::kSkipNonFinite);
  EXPECT_EQ(s.scale(), o.min_scale);
}

TEST(DynamicLossScale, RejectsBadOptions) {
  DynamicLossScale::Options o;
  o.backoff_factor = 1.5;
  const auto bad = DynamicLossScale::create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("backoff_factor 1.5"), std::string::npos) << bad.status().message();
  // A floor above the start: the first back-off raised the scale to it (1024 -> 1e9, and
  // every later step skipped). An infinite growth made the scale infinite.
  DynamicLossScale::Options floor_above;
  floor_above.init_scale = 1024.0;
  floor_above.min_scale = 1e9;
  EXPECT_FALSE(DynamicLossScale::create(floor_above).ok());
  DynamicLossScale::Options infinite_growth;
  infinite_growth.growth_factor = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(DynamicLossScale::create(infinite_growth).ok());
}

TEST(DynamicLossScale, NeverGrowsPastFiniteNorRestoresBelowItsFloor) {
  DynamicLossScale::Options o;
  o.init_scale = 1e300;
  o.growth_factor = 1e10;
  o.growth_interval = 1;
  auto scale = DynamicLossScale::create(o);
  ASSERT_TRUE(scale.ok());
  scale->update(StepAction::kApply);
  EXPECT_EQ(scale->scale(), 1e300) << "a growth past the largest double keeps the scale, as GradScaler";
  EXPECT_EQ(scale->finite_steps(), 0);
  o = DynamicLossScale::Options{};
  o.min_scale = 64.0;
  auto floored = DynamicLossScale::create(o);
  ASSERT_TRUE(floored.ok());
  ASSERT_TRUE(floored->restore(8.0, 3).ok());
  EXPECT_EQ(floored->scale(), 64.0);
  floored->update(StepAction::kSkipNonFinite);
  EXPECT_EQ(floored->scale(), 64.0) << "a back-off never raises the scale";
}

}  // namespace
}  // namespace zdp::optim
