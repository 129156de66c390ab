// Mixed precision on real rank processes (CPU, Gloo): bf16 and fp16 compute with fp32
// masters in the owned slices, bf16 reduction, and fp16 dynamic loss scaling where an
// overflow on one rank skips the step on every rank and backs the scale off.
#include <gtest/gtest.h>

#include "testing/engine_comparisons.h"
#include "testing/tolerance.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;
using testing::max_difference;
using testing::run_engine;

EngineOptions options(int stage, DType compute, DType reduce = DType::kF32) {
  EngineOptions o = testing::comparison_options(stage);
  o.compute_dtype = compute;
  o.zero.reduce_dtype = reduce;
  // This model's loss-scaled gradients reach 2^16 at the default scale 2^16, which
  // overflows fp16 (max 65504) in the first steps: start lower so that the only overflow
  // is the injected one.
  o.loss_scale.initial = 4096;
  return o;
}

EngineRunResult run(int world, const EngineOptions& o, int steps = 20) {
  return testing::run_expecting_success(world, o, steps);
}

struct Case {
  DType compute;
  DType reduce;
};

// How far 16-bit training may drift from fp32 training on the same data. A 16-bit
// parameter view or gradient differs from its fp32 value by at most the storage unit
// roundoff u (bf16 2^-8, fp16 2^-11; relative), so each AdamW step (about lr per element)
// changes by at most ~2 u lr (m and v both perturbed); over T steps that is 2 T lr u,
// doubled (testing::kSafety) for the second-order terms and the feedback through the
// forward pass. bf16: 3.1e-3 (runs differ by 0.9e-3), fp16: 3.9e-4 (2.3e-4). A lost 1/K
// moves parameters by ~1e-2.
double drift_bound(DType stored, int steps, double lr) {
  return testing::kSafety * 2.0 * steps * lr * testing::store_roundoff(stored);
}

class Precision : public ::testing::TestWithParam<Case> {};

TEST_P(Precision, StagesAgreeBitForBitAndTrackFp32) {
  const Case c = GetParam();
  const EngineRunResult ddp = run(2, options(0, c.compute, c.reduce));
  const EngineRunResult init = run(2, options(0, c.compute, c.reduce), 0);
  EXPECT_GT(max_difference(ddp, init).value, 1e-2) << "the run did not train";
  for (const StepStats& s : ddp.stats) EXPECT_FALSE(s.skipped) << "no step should overflow here";
  // Two ranks: every element of the reduction is one addition a + b, exact to the bit
  // whichever collective (all-reduce or reduce-scatter) computes it, and everything else
  // is the same per-element math on the same values. So the stages agree exactly.
  for (int stage : {1, 2, 3}) {
    const auto d = max_difference(run(2, options(stage, c.compute, c.reduce)), ddp);
    EXPECT_EQ(d.value, 0.0) << to_string(c.compute) << " compute, " << to_string(c.reduce) << " reduce, stage "
                            << stage << " vs 0: " << d.where;
  }
  const DType stored = c.compute == DType::kF32 ? c.reduce : c.compute;
  const auto d = max_difference(ddp, run(2, options(0, DType::kF32)));
  std::printf("%s compute, %s reduce vs fp32: max |difference| %.3g (bound %.3g)\n", to_string(c.compute),
              to_string(c.reduce), d.value, drift_bound(stored, 20, 1e-2));
  EXPECT_LE(d.value, drift_bound(stored, 20, 1e-2)) << d.where;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Precision,
                         ::testing::Values(Case{DType::kBF16, DType::kF32}, Case{DType::kBF16, DType::kBF16},
                                           Case{DType::kF16, DType::kF32}, Case{DType::kF32, DType::kBF16}));

// zero.accumulate = "sharded" in 16 bits: the same sums as local accumulation in another
// order (and, with a bf16 reduction, each micro-batch rounded into bf16 before the fp32
// sum instead of the fp32 sum rounded once), so within the 16-bit drift bound of local
// accumulation and of one rank on the same global batch.
TEST(PrecisionAccumulation, ShardedTracksLocalAndOneRankInBf16) {
  for (DType reduce : {DType::kF32, DType::kBF16}) {
    for (int stage : {2, 3}) {
      EngineOptions local = options(stage, DType::kBF16, reduce);
      const EngineRunResult one = run(1, local, 10);
      local.accum_steps = 3;
      EngineOptions sharded = local;
      sharded.zero.accumulate = GradAccumulation::kSharded;
      const EngineRunResult s = run(2, sharded, 10);
      const double bound = drift_bound(DType::kBF16, 10, 1e-2);
      const std::string at = std::string("bf16 compute, ") + to_string(reduce) + " reduce, stage " +
                             std::to_string(stage) + ", K 2, accum_steps 3";
      const auto dl = max_difference(s, run(2, local, 10));
      EXPECT_LE(dl.value, bound) << at << ": sharded vs local: " << dl.where;
      const auto d1 = max_difference(s, one);
      EXPECT_LE(d1.value, bound) << at << ": sharded vs one rank: " << d1.where;
      for (const StepStats& st : s.stats) EXPECT_FALSE(st.skipped) << at;
    }
  }
}

// Local accumulation in 16 bits at stages 0-1 with an fp32 reduction keeps its sums in the
// fp32 reduce copy (accumulates_in_reduce_copy: no buffer of its own). One rank over 2
// micro-batches adds the two fp32-cast gradients in that copy; two ranks over 1 add the
// same two values in the all-reduce or reduce-scatter: the same bits.
TEST(PrecisionAccumulation, LocalSumsInTheReduceCopyEqualTwoRanksBitForBit) {
  for (int stage : {0, 1}) {
    EngineOptions two = options(stage, DType::kBF16);
    EngineOptions one = two;
    one.accum_steps = 2;
    const auto d = max_difference(run(1, one, 10), run(2, two, 10));
    EXPECT_EQ(d.value, 0.0) << "stage " << stage << ": " << d.where;
  }
}

class Overflow : public ::testing::TestWithParam<int> {};

// An inf in one rank's gradient at step 3 (of 0..6): every rank skips that step (no
// update, the step count stands still) and halves the scale; the scale doubles after
// every 3 finite steps. The parameters after the run equal those of the same run
// stopped before the poisoned step, bit for bit.
TEST_P(Overflow, InfOnOneRankSkipsTheStepOnEveryRankAndBacksOff) {
  const int stage = GetParam();
  for (int world : {2, 3}) {
    EngineRun r;
    r.world = world;
    r.options = options(stage, DType::kF16);
    r.options.loss_scale.growth_interval = 3;
    r.steps = 7;
    r.poison_rank = world - 1;
    r.poison_step = 3;
    const EngineRunResult poisoned = run_engine(r);
    ASSERT_EQ(poisoned.failures, "");
    const double scales[] = {4096, 4096, 8192, 4096, 4096, 4096, 8192};
    const int64_t counts[] = {1, 2, 3, 3, 4, 5, 6};
    for (int rank = 0; rank < world; ++rank) {
      const auto& stats = poisoned.stats_by_rank[static_cast<size_t>(rank)];
      ASSERT_EQ(stats.size(), 7u) << "rank " << rank;
      for (size_t s = 0; s < stats.size(); ++s) {
        EXPECT_EQ(stats[s].skipped, s == 3) << "world " << world << ", rank " << rank << ", step " << s;
        EXPECT_EQ(stats[s].loss_scale, scales[s]) << "world " << world << ", rank " << rank << ", step " << s;
        EXPECT_EQ(stats[s].step, counts[s]) << "world " << world << ", rank " << rank << ", step " << s;
      }
    }
    r.steps = 3;
    r.poison_rank = -1;
    const auto d = max_difference(run_engine(r), [&] {
      r.steps = 4;
      r.poison_rank = world - 1;
      return run_engine(r);
    }());
    EXPECT_EQ(d.value, 0.0) << "the skipped step changed parameters: " << d.where;
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, Overflow, ::testing::Values(0, 2, 3));

}  // namespace
}  // namespace zdp
