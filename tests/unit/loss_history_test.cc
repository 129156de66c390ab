// The loss curve a run keeps (trainer/loop/loss_history.h): every step while it is short,
// bounded by merging neighbours once it is long, and the same after a trip through JSON
// (a checkpoint's trainer state); malformed JSON is refused with the field named.
#include "trainer/loop/loss_history.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace zdp::trainer {
namespace {

TEST(LossHistory, KeepsEveryStepAndEvaluationOfAShortRun) {
  LossHistory h;
  for (int s = 1; s <= 10; ++s) h.add_step(s, 10.0 - s, 100.0 * s);
  h.add_eval(0, 11);
  h.add_eval(10, 0.5);
  const std::vector<LossHistory::Point> p = h.points();
  ASSERT_EQ(p.size(), 10u);
  EXPECT_EQ(p[3].step, 4);
  EXPECT_DOUBLE_EQ(p[3].loss, 6);
  EXPECT_DOUBLE_EQ(p[3].tokens_per_s, 400);
  EXPECT_EQ(h.evals().size(), 2u);
  EXPECT_EQ(h.stride(), 1);
}

TEST(LossHistory, ALongRunStaysBoundedAndKeepsItsShape) {
  LossHistory h;
  const int steps = 3 * static_cast<int>(LossHistory::kMaxPoints) + 7;
  for (int s = 1; s <= steps; ++s) h.add_step(s, static_cast<double>(s), 1);
  const std::vector<LossHistory::Point> p = h.points();
  EXPECT_LE(p.size(), LossHistory::kMaxPoints + 1);
  EXPECT_GT(p.size(), LossHistory::kMaxPoints / 2);
  EXPECT_EQ(h.stride(), 4);
  EXPECT_EQ(p.back().step, steps);  // the last (partial) group is there
  for (size_t i = 1; i < p.size(); ++i) {
    ASSERT_GT(p[i].step, p[i - 1].step);
    // Each point is the mean of the (at most 4) steps of its group, ending at its step.
    EXPECT_LE(p[i].loss, static_cast<double>(p[i].step)) << i;
    EXPECT_GE(p[i].loss, static_cast<double>(p[i].step) - 1.5) << i;
  }
}

TEST(LossHistory, RoundTripsThroughJson) {
  LossHistory h;
  for (int s = 1; s <= 5; ++s) h.add_step(s, 1.0 / s, 10);
  h.add_step(6, std::numeric_limits<double>::infinity(), 10);  // an fp16 overflow: stored as null
  h.add_eval(5, 0.3);
  const LossHistory back = LossHistory::from_json(nlohmann::json::parse(h.to_json().dump())).value();
  ASSERT_EQ(back.points().size(), 6u);
  EXPECT_DOUBLE_EQ(back.points()[1].loss, 0.5);
  EXPECT_TRUE(std::isnan(back.points()[5].loss));
  EXPECT_EQ(back.evals(), h.evals());
}

// A checkpoint taken inside a group of a merged history (stride > 1): the resumed run
// completes that group, so its curve is the uninterrupted run's, point for point (the
// group was read back as a whole point, and every later point shifted by a step).
TEST(LossHistory, AResumeInsideAMergedGroupContinuesTheSameCurve) {
  const int64_t total = 2 * static_cast<int64_t>(LossHistory::kMaxPoints) + 301;
  auto loss = [](int64_t s) { return 1.0 + static_cast<double>(s % 7) / 8.0; };
  LossHistory whole;
  for (int64_t s = 1; s <= total; ++s) whole.add_step(s, loss(s), 100.0 + static_cast<double>(s));
  for (int64_t cut : {int64_t{4097}, int64_t{4098}, 2 * static_cast<int64_t>(LossHistory::kMaxPoints) + 3}) {
    SCOPED_TRACE(cut);
    LossHistory first;
    for (int64_t s = 1; s <= cut; ++s) first.add_step(s, loss(s), 100.0 + static_cast<double>(s));
    ASSERT_GT(first.stride(), 1);
    LossHistory resumed = LossHistory::from_json(nlohmann::json::parse(first.to_json().dump())).value();
    EXPECT_EQ(resumed.points().size(), first.points().size());
    for (int64_t s = cut + 1; s <= total; ++s) resumed.add_step(s, loss(s), 100.0 + static_cast<double>(s));
    const std::vector<LossHistory::Point> a = whole.points(), b = resumed.points();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].step, b[i].step) << i;
      EXPECT_NEAR(a[i].loss, b[i].loss, 1e-12) << i;
      EXPECT_NEAR(a[i].tokens_per_s, b[i].tokens_per_s, 1e-9) << i;
    }
  }
  // A pending count the stride cannot hold, or one without a point, is refused.
  nlohmann::json j = LossHistory().to_json();
  j["pending"] = 1;
  EXPECT_NE(LossHistory::from_json(j).status().message().find("'pending' = 1 is outside [0, 0]"), std::string::npos)
      << LossHistory::from_json(j).status().message();
  j["stride"] = 4;
  EXPECT_NE(LossHistory::from_json(j).status().message().find("no points"), std::string::npos);
  // A history written before "pending" existed still reads.
  j = LossHistory().to_json();
  j.erase("pending");
  EXPECT_TRUE(LossHistory::from_json(j).ok());
}

TEST(LossHistory, MalformedJsonIsRefusedNamingTheField) {
  nlohmann::json j = LossHistory().to_json();
  j["loss"] = {1.0};  // one loss, no step
  StatusOr<LossHistory> bad = LossHistory::from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("arrays of different lengths"), std::string::npos);
  j = LossHistory().to_json();
  j.erase("eval_step");
  EXPECT_NE(LossHistory::from_json(j).status().message().find("'eval_step' is missing"), std::string::npos);
  j = LossHistory().to_json();
  j["step"] = {2, 1};
  j["loss"] = {1.0, 1.0};
  j["tokens_per_s"] = {1.0, 1.0};
  EXPECT_NE(LossHistory::from_json(j).status().message().find("out of order"), std::string::npos);
  EXPECT_FALSE(LossHistory::from_json(nlohmann::json::array()).ok());
}

// A checkpoint a user edited: every integer is bounded before it is used (a stride near
// 2^63 overflowed when a long resumed run doubled it; a step above INT64_MAX wrapped).
TEST(LossHistory, OutOfRangeIntegersAreRefusedNamingTheField) {
  auto message = [](nlohmann::json j) { return LossHistory::from_json(j).status().message(); };
  nlohmann::json j = LossHistory().to_json();
  j["stride"] = 0;
  EXPECT_NE(message(j).find("'stride' = 0 is outside [1, 1099511627776]"), std::string::npos) << message(j);
  j["stride"] = 9223372036854775808ull;
  EXPECT_NE(message(j).find("'stride' = 9223372036854775808 is outside"), std::string::npos) << message(j);
  j["stride"] = 2.0;
  EXPECT_NE(message(j).find("'stride' is not an integer"), std::string::npos) << message(j);
  j = LossHistory().to_json();
  j["step"] = {18446744073709551615ull};
  j["loss"] = {1.0};
  j["tokens_per_s"] = {1.0};
  EXPECT_NE(message(j).find("step of point 0 = 18446744073709551615 is outside"), std::string::npos) << message(j);
  j["step"] = {-1};
  EXPECT_NE(message(j).find("step of point 0 = -1 is outside"), std::string::npos) << message(j);
  j = LossHistory().to_json();
  j["eval_step"] = {5, 3};
  j["eval_loss"] = {1.0, 1.0};
  EXPECT_NE(message(j).find("evaluation steps out of order at evaluation 1"), std::string::npos) << message(j);
  j["eval_step"] = {5, 1e20};
  EXPECT_NE(message(j).find("step of evaluation 1 is not an integer"), std::string::npos) << message(j);
  j["eval_step"] = {5, 5};  // the last step's evaluation after a periodic one at the same step
  EXPECT_TRUE(LossHistory::from_json(j).ok());
}

TEST(LossHistory, LastStepIsTheLatestPointOrEvaluation) {
  LossHistory h;
  EXPECT_EQ(h.last_step(), -1);
  h.add_step(1, 1.0, 1.0);
  h.add_step(2, 1.0, 1.0);
  EXPECT_EQ(h.last_step(), 2);
  h.add_eval(7, 1.0);
  EXPECT_EQ(h.last_step(), 7);
  LossHistory coarse = LossHistory::from_json({{"stride", 4}, {"step", {4}}, {"loss", {1.0}}, {"tokens_per_s", {1.0}},
                                               {"eval_step", nlohmann::json::array()}, {"eval_loss", nlohmann::json::array()}})
                           .value();
  coarse.add_step(5, 1.0, 1.0);  // a group of 4 not yet complete still counts
  EXPECT_EQ(coarse.last_step(), 5);
}

}  // namespace
}  // namespace zdp::trainer
