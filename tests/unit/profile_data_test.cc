// The profiler's arithmetic on synthetic timelines (profile/src/profile_data.h): steps
// cut into parts that add up to the step, communication waits moved out of
// forward/backward, collectives paired with their bus bandwidth.
#include "profile/src/profile_data.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/unit/profile_timelines.h"

namespace zdp::profile {
namespace {

using timelines::at;
using timelines::Kind;
using timelines::one_step;

TEST(ProfileSteps, PartsCoverTheStepAndWaitsLeaveForwardAndBackward) {
  const std::vector<StepProfile> steps = steps_from_timeline(one_step(100.0, 0));
  ASSERT_EQ(steps.size(), 1u);
  const StepProfile& s = steps[0];
  EXPECT_DOUBLE_EQ(s.seconds(), 19.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kData), 2.0);        // 0-1 and 6-7
  EXPECT_DOUBLE_EQ(s.part(StepPart::kForward), 4.0);     // 1-3, 7-8, 9-10
  EXPECT_DOUBLE_EQ(s.part(StepPart::kBackward), 5.0);    // 3-6, 10-12
  EXPECT_DOUBLE_EQ(s.part(StepPart::kOther), 0.5);       // 12-12.5: the micro-batch end -> step()
  EXPECT_DOUBLE_EQ(s.part(StepPart::kReduceWait), 1.5);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kNorm), 1.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kOptimizer), 2.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kGatherWait), 2.0);  // 8-9 in forward, 17-18 in step()
  EXPECT_DOUBLE_EQ(s.part(StepPart::kPostStep), 1.0);
  double sum = 0;
  for (double p : s.parts) sum += p;
  EXPECT_DOUBLE_EQ(sum, s.seconds());
  EXPECT_DOUBLE_EQ(s.compute(), 9.0);
  ASSERT_EQ(s.collectives.size(), 5u);
  EXPECT_EQ(s.collectives[2].bucket, 0);
  EXPECT_EQ(s.collectives[2].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(s.collectives[2].bytes, 8192);
  EXPECT_DOUBLE_EQ(s.collectives[2].seconds(), 2.5);
  EXPECT_EQ(s.collectives[3].bucket, -1);
  EXPECT_NEAR(s.comm(), 1.0 + 1.1 + 2.5 + 0.6 + 2.0, 1e-9);
  EXPECT_NEAR(s.exposed_comm(), 1.5 + 2.0 + 0.6, 1e-9);  // the norm's all-reduce blocks
  // The spans tile the step in order.
  double cursor = s.begin;
  for (const Span& sp : s.spans) {
    EXPECT_GE(sp.begin, cursor - 1e-12);
    cursor = sp.end;
  }
}

TEST(ProfileSteps, IncompleteStepsAreLeftOutAndStepsComeInOrder) {
  std::vector<TimelineEvent> events = one_step(50.0, 4);
  const std::vector<TimelineEvent> earlier = one_step(0.0, 3);
  events.insert(events.end(), earlier.begin(), earlier.end());
  events.push_back(at(Kind::kIterationBegin, 80.0, 5));  // a step without its end
  const std::vector<StepProfile> steps = steps_from_timeline(events);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 3);
  EXPECT_EQ(steps[1].step, 4);
}

// A CPU rank's step end is stamped by the compute stream's worker, which can reach it
// after the host began the next step: the step ends where the next begins, its post-step
// part shortened, so no two steps overlap (the trace's lane must nest).
TEST(ProfileSteps, AStepEndsWhereTheNextBegins) {
  std::vector<TimelineEvent> events = one_step(0.0, 0);
  for (TimelineEvent& e : events) {
    if (e.kind == Kind::kIterationEnd) e.seconds = 30;  // the worker reached it late
  }
  const std::vector<TimelineEvent> next = one_step(25.0, 1);
  events.insert(events.end(), next.begin(), next.end());
  const std::vector<StepProfile> steps = steps_from_timeline(events);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[0].end, 25.0);
  EXPECT_DOUBLE_EQ(steps[0].part(StepPart::kPostStep), 25.0 - 18.0);
  double parts = 0;
  for (int p = 0; p < kNumStepParts; ++p) parts += steps[0].parts[static_cast<size_t>(p)];
  EXPECT_DOUBLE_EQ(parts, steps[0].seconds());
  EXPECT_DOUBLE_EQ(steps[1].begin, 25.0);
  EXPECT_DOUBLE_EQ(steps[1].end, 44.0);  // the last step keeps its own end
}

TEST(ProfileSteps, BusBandwidthFollowsNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 1), 0.0);
  const CollectiveTiming c{0, CollectiveOp::kReduceScatter, 1 << 20, 1.0, 1.5};
  EXPECT_DOUBLE_EQ(c.busbw(4), (1 << 20) / 0.5 * 0.75);
}

}  // namespace
}  // namespace zdp::profile
