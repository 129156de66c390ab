// docs/design.md's theorem on real rank processes (CPU, Gloo): K ranks train like one rank on
// the same global batch, for every stage; stages agree with each other; accumulation
// over micro-batches equals more ranks; the clipping norm is the single-rank norm.
#include <gtest/gtest.h>

#include "testing/engine_comparisons.h"

namespace zdp {
namespace {

using testing::EngineRunResult;
using testing::max_difference;

constexpr double kTol = testing::kRegroupingTol;  // derived in testing/engine_comparisons.h

EngineOptions options(int stage) { return testing::comparison_options(stage); }

EngineRunResult run(int world, const EngineOptions& o, int steps = 20) {
  return testing::run_expecting_success(world, o, steps);
}

// The runs must actually train: parameters far from their initial values (by more than
// the tolerance), or equality would prove nothing.
void expect_trained(const EngineRunResult& trained, const EngineRunResult& initial) {
  EXPECT_GT(max_difference(trained, initial).value, 1e-2);
}

// Each step's global gradient norm: a sum of squares of the same elements in another
// grouping, so within the relative tolerance.
void expect_same_norms(const EngineRunResult& a, const EngineRunResult& b) {
  ASSERT_EQ(a.stats.size(), b.stats.size());
  for (size_t s = 0; s < a.stats.size(); ++s) {
    EXPECT_NEAR(a.stats[s].grad_norm, b.stats[s].grad_norm, kTol * b.stats[s].grad_norm) << "step " << s;
    EXPECT_FALSE(a.stats[s].skipped) << "step " << s;
  }
}

class Theorem : public ::testing::TestWithParam<int> {};

TEST_P(Theorem, KRanksEqualOneRankOnTheSameGlobalBatch) {
  const int stage = GetParam();
  const EngineRunResult one = run(1, options(stage));
  expect_trained(one, run(1, options(stage), 0));
  for (int world : {2, 3, 4}) {
    const EngineRunResult many = run(world, options(stage));
    const auto d = max_difference(many, one);
    std::printf("stage %d, %d ranks vs 1: max |difference| %.3g\n", stage, world, d.value);
    EXPECT_LE(d.value, kTol) << "stage " << stage << ", " << world << " ranks vs 1: " << d.where;
    expect_same_norms(many, one);
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, Theorem, ::testing::Values(0, 1, 2, 3));

TEST(Stages, AllStagesGiveTheSameParameters) {
  for (int world : {2, 4}) {
    const EngineRunResult ddp = run(world, options(0));
    // Two ranks: each reduced element is one addition a + b, the same bits whichever
    // collective computes it, so the stages agree exactly; four ranks group the sum
    // differently in an all-reduce and a reduce-scatter (kTol).
    const double tol = world == 2 ? 0.0 : kTol;
    for (int stage : {1, 2, 3}) {
      const auto d = max_difference(run(world, options(stage)), ddp);
      EXPECT_LE(d.value, tol) << world << " ranks, stage " << stage << " vs stage 0: " << d.where;
    }
  }
}

TEST(Accumulation, FourMicroBatchesOnOneRankEqualFourRanks) {
  for (int stage : {0, 2, 3}) {
    EngineOptions accum = options(stage);
    accum.accum_steps = 4;
    const auto d = max_difference(run(1, accum), run(4, options(stage)));
    EXPECT_LE(d.value, kTol) << "stage " << stage << ": accum_steps 4 at K=1 vs accum_steps 1 at K=4: " << d.where;
  }
}

// zero.accumulate = "sharded": every micro-batch reduce-scattered into the fp32 shard. The
// same sums in another order, so within kTol of local accumulation and of one rank on
// the same global batch (the runs split one global batch of 24 over ranks x micro-batches).
TEST(Accumulation, ShardedEqualsLocalAndOneRank) {
  for (int stage : {2, 3}) {
    const EngineRunResult one = run(1, options(stage), 10);
    for (int accum_steps : {2, 3}) {
      EngineOptions local = options(stage);
      local.accum_steps = accum_steps;
      EngineOptions sharded = local;
      sharded.zero.accumulate = GradAccumulation::kSharded;
      const int world = accum_steps == 2 ? 4 : 2;  // 24 samples: 3 or 4 per micro-batch
      const EngineRunResult l = run(world, local, 10), s = run(world, sharded, 10);
      const std::string at = "stage " + std::to_string(stage) + ", K " + std::to_string(world) + ", accum_steps " +
                             std::to_string(accum_steps);
      const auto d = max_difference(s, l);
      EXPECT_LE(d.value, kTol) << at << ": sharded vs local: " << d.where;
      expect_same_norms(s, l);
      const auto d1 = max_difference(s, one);
      EXPECT_LE(d1.value, kTol) << at << ": sharded vs one rank: " << d1.where;
      if (accum_steps == 3) {  // without overlap every micro-batch reduces when it completes
        sharded.zero.overlap = false;
        const auto d0 = max_difference(run(world, sharded, 10), l);
        EXPECT_LE(d0.value, kTol) << at << ": sharded without overlap vs local: " << d0.where;
      }
    }
  }
}

TEST(Clipping, GlobalNormEqualsTheSingleRankNormAndUpdatesMatch) {
  EngineOptions o = options(2);
  o.optim.grad_clip = 0.05;  // below the model's gradient norms: every step clips
  const EngineRunResult one = run(1, o);
  ASSERT_EQ(one.stats.size(), 20u);
  for (int world : {2, 4}) {
    const EngineRunResult many = run(world, o);
    ASSERT_EQ(many.stats.size(), one.stats.size());
    for (size_t s = 0; s < one.stats.size(); ++s) {
      EXPECT_LT(one.stats[s].clip_coef, 1.0) << "step " << s << " did not clip";
      EXPECT_NEAR(many.stats[s].clip_coef, one.stats[s].clip_coef, kTol) << world << " ranks, step " << s;
    }
    expect_same_norms(many, one);
    const auto d = max_difference(many, one);
    EXPECT_LE(d.value, kTol) << world << " ranks, clipped: " << d.where;
  }
}

}  // namespace
}  // namespace zdp
