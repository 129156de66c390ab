// The step decision (kernels/step_decision.h), which the engine computes where the
// gradient statistics are and the optimizer kernels read from there: the same numbers as
// the host-side rule it replaced (optim::decide_grad_scale and the engine's clip x
// 1/(K accum scale)) to the bit; and the optimizer updates that read it give the bits of
// a direct call with the decided scale, do nothing on a skip, and take the alternative
// step after a skipped one. Also the loss sum dp-train keeps on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/loss_sum.h"
#include "kernels/sgd.h"
#include "kernels/step_decision.h"
#include "optim/clip.h"
#include "testing/test_random.h"

namespace zdp::kernels {
namespace {

using zdp::testing::TestRandom;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST(StepDecision, SameBitsAsTheHostRuleItReplaced) {
  TestRandom rng;
  SCOPED_TRACE(rng.trace());
  for (int trial = 0; trial < 500; ++trial) {
    const int buckets = 1 + static_cast<int>(rng.uniform(0, 40));
    std::vector<GradStats> stats(static_cast<size_t>(buckets));
    for (GradStats& s : stats) s.sum_sq = static_cast<float>(rng.uniform(0, 10) * rng.uniform(0, 10));
    const double inv_scale = 1.0 / (rng.uniform(1, 8) * rng.uniform(1, 4));
    const double max_norm = trial % 3 == 0 ? 0.0 : rng.uniform(0.1, 20);
    StepDecision d;
    ASSERT_TRUE(decide_step_cpu({stats.data(), buckets, inv_scale, max_norm, &d}).ok());
    // What the engine did on the host before: bucket-order double sum, one fp32 rounding,
    // optim's decision at loss scale 1, then clip x inv_scale rounded to fp32.
    double sum = 0.0;
    for (const GradStats& s : stats) sum += s.sum_sq;
    const optim::GradScaleDecision ref = optim::decide_grad_scale(GradStats{static_cast<float>(sum), 0.0f}, 1.0, max_norm);
    EXPECT_EQ(d.skip, 0);
    EXPECT_TRUE(same_bits(d.grad_norm, ref.grad_norm)) << d.grad_norm << " vs " << ref.grad_norm;
    EXPECT_TRUE(same_bits(d.clip_coef, ref.clip_coef)) << d.clip_coef << " vs " << ref.clip_coef;
    EXPECT_TRUE(same_bits(d.grad_scale, static_cast<float>(ref.clip_coef * inv_scale)));
  }
}

TEST(StepDecision, NonFiniteAnywhereSkipsAndTheNextDecisionRemembersIt) {
  std::vector<GradStats> stats(3, GradStats{1.0f, 0.0f});
  stats[1].nonfinite = 1.0f;
  StepDecision d;
  ASSERT_TRUE(decide_step_cpu({stats.data(), 3, 0.5, 1.0, &d}).ok());
  EXPECT_EQ(d.skip, 1);
  EXPECT_EQ(d.prev_skip, 0);
  EXPECT_EQ(d.grad_scale, 0.0f);
  EXPECT_EQ(d.clip_coef, 0.0);
  stats[1] = GradStats{std::numeric_limits<float>::infinity(), 0.0f};  // an overflowing sum
  ASSERT_TRUE(decide_step_cpu({stats.data(), 3, 0.5, 1.0, &d}).ok());
  EXPECT_EQ(d.skip, 1);
  EXPECT_EQ(d.prev_skip, 1);
  stats[1] = GradStats{1.0f, 0.0f};
  ASSERT_TRUE(decide_step_cpu({stats.data(), 3, 0.5, 1.0, &d}).ok());
  EXPECT_EQ(d.skip, 0);
  EXPECT_EQ(d.prev_skip, 1) << "the step after a skipped one: the update takes alt_step";
  EXPECT_EQ(decide_step_cpu({stats.data(), 3, 0.0, 1.0, &d}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decide_step_cpu({stats.data(), 3, 1.0, 1.0, nullptr}).code(), StatusCode::kInvalidArgument);
}

// Deterministic mode's exact sum leaves a non-finite value out of the squares: the skipped
// step's norm is infinite, as the default mode's (it printed the finite rest's).
TEST(StepDecision, ASkipFromTheExactSumReportsAnInfiniteNorm) {
  const std::vector<float> grad = {3.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
  ExactSumSq exact{};
  ASSERT_TRUE(exact_sumsq_cpu({grad.data(), DType::kF32, 3, 1.0f, &exact}).ok());
  StepDecision d;
  StepDecisionArgs a;
  a.inv_scale = 1.0;
  a.max_norm = 1.0;
  a.out = &d;
  a.exact = &exact;
  a.exact_records = 1;
  ASSERT_TRUE(decide_step_cpu(a).ok());
  EXPECT_EQ(d.skip, 1);
  EXPECT_TRUE(std::isinf(d.grad_norm)) << d.grad_norm;
  const std::vector<float> finite = {3.0f, 4.0f};
  exact = ExactSumSq{};
  ASSERT_TRUE(exact_sumsq_cpu({finite.data(), DType::kF32, 2, 1.0f, &exact}).ok());
  ASSERT_TRUE(decide_step_cpu(a).ok());
  EXPECT_EQ(d.skip, 0);
  EXPECT_EQ(d.grad_norm, 5.0);
}

// AdamW over 257 elements with the given step, lr and scale, or with a decision.
struct AdamWRun {
  std::vector<float> master, m, v, grad;
  std::vector<uint16_t> out;
  explicit AdamWRun(TestRandom& rng) : master(257), m(257, 0.01f), v(257, 0.02f), grad(257), out(257, 0) {
    for (float& x : master) x = static_cast<float>(rng.uniform(-1, 1));
    for (float& x : grad) x = static_cast<float>(rng.uniform(-3, 3));
  }
  AdamWArgs args(int64_t step, float lr, float scale) {
    AdamWArgs a;
    a.count = 257;
    a.master = master.data();
    a.m = m.data();
    a.v = v.data();
    a.grad = grad.data();
    a.grad_dtype = DType::kF32;
    a.param_out = out.data();
    a.param_dtype = DType::kBF16;
    a.rounding = Rounding::kStochastic;  // keyed by the step: the alternative's key shows too
    a.seed = 11;
    a.step = step;
    a.lr = lr;
    a.weight_decay = 0.1f;
    a.grad_scale = scale;
    return a;
  }
  bool operator==(const AdamWRun& o) const {
    return std::memcmp(master.data(), o.master.data(), master.size() * 4) == 0 && m == o.m && v == o.v && out == o.out;
  }
};

TEST(StepDecision, AdamWReadingItIsTheDirectCallAndSkipsAndTakesTheAlternative) {
  TestRandom rng;
  SCOPED_TRACE(rng.trace());
  const AdamWRun start(rng);
  StepDecision d;
  d.grad_scale = 0.37f;
  // Applied: the decision's scale, the main step.
  AdamWRun direct = start, decided = start;
  ASSERT_TRUE(adamw_update_cpu(direct.args(5, 1e-2f, 0.37f)).ok());
  AdamWArgs a = decided.args(5, 1e-2f, 1.0f);
  a.decision = &d;
  a.alt_step = 4;
  a.alt_lr = 2e-2f;
  ASSERT_TRUE(adamw_update_cpu(a).ok());
  EXPECT_TRUE(direct == decided);
  // After a skipped step: the alternative step and lr.
  d.prev_skip = 1;
  AdamWRun alt_direct = start, alt_decided = start;
  ASSERT_TRUE(adamw_update_cpu(alt_direct.args(4, 2e-2f, 0.37f)).ok());
  a = alt_decided.args(5, 1e-2f, 1.0f);
  a.decision = &d;
  a.alt_step = 4;
  a.alt_lr = 2e-2f;
  ASSERT_TRUE(adamw_update_cpu(a).ok());
  EXPECT_TRUE(alt_direct == alt_decided);
  EXPECT_FALSE(alt_decided == decided);
  // Skipped: nothing changes.
  d.skip = 1;
  AdamWRun skipped = start;
  a = skipped.args(5, 1e-2f, 1.0f);
  a.decision = &d;
  a.alt_step = 4;
  a.alt_lr = 2e-2f;
  ASSERT_TRUE(adamw_update_cpu(a).ok());
  EXPECT_TRUE(skipped == start);
  a.alt_step = 0;  // checked like step
  EXPECT_EQ(adamw_update_cpu(a).code(), StatusCode::kInvalidArgument);
}

TEST(StepDecision, SgdReadingItIsTheDirectCall) {
  std::vector<float> master(100, 0.5f), buf(100, 0.25f), grad(100, 2.0f);
  std::vector<float> master2 = master, buf2 = buf;
  SgdArgs a;
  a.count = 100;
  a.master = master.data();
  a.momentum_buf = buf.data();
  a.momentum = 0.9f;
  a.grad = grad.data();
  a.step = 1;  // the alternative: the first step initialises the buffer
  a.lr = 0.1f;
  a.grad_scale = 0.5f;
  ASSERT_TRUE(sgd_update_cpu(a).ok());
  StepDecision d;
  d.grad_scale = 0.5f;
  d.prev_skip = 1;
  SgdArgs b = a;
  b.master = master2.data();
  b.momentum_buf = buf2.data();
  b.step = 2;
  b.lr = 0.3f;
  b.grad_scale = 1.0f;
  b.decision = &d;
  b.alt_step = 1;
  b.alt_lr = 0.1f;
  ASSERT_TRUE(sgd_update_cpu(b).ok());
  EXPECT_EQ(master, master2);
  EXPECT_EQ(buf, buf2);
}

TEST(LossSum, CpuIsTheSequentialMeanAndRoundsOnRequest) {
  TestRandom rng;
  std::vector<float> losses(1000);
  for (float& x : losses) x = static_cast<float>(rng.uniform(0, 11));
  double sum = 123.0;
  float rounded = 0;
  ASSERT_TRUE(loss_sum_cpu({losses.data(), 1000, 4.0, &sum, /*first=*/true, nullptr}).ok());
  double expected = 0;
  for (float x : losses) expected += x;
  expected = expected / 1000.0 / 4.0;
  EXPECT_TRUE(same_bits(sum, expected));
  ASSERT_TRUE(loss_sum_cpu({losses.data(), 500, 4.0, &sum, false, &rounded}).ok());
  double half = 0;
  for (int i = 0; i < 500; ++i) half += losses[static_cast<size_t>(i)];
  expected = expected + half / 500.0 / 4.0;
  EXPECT_TRUE(same_bits(sum, expected));
  EXPECT_TRUE(same_bits(rounded, static_cast<float>(expected)));
  EXPECT_EQ(loss_sum_cpu({losses.data(), 0, 1.0, &sum, false, nullptr}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zdp::kernels
