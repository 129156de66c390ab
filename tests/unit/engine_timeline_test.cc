// The engine's timeline on CPU ranks: a step's end (kIterationEnd) is when the compute
// stream has run what the trainer queued there after step(), not when the host asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "testing/single_rank.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

// dp-train all-reduces each step's losses on the compute stream after step(); on CPU
// ranks that collective runs on the stream's worker. The step's end was stamped by the
// host at once, so post-step left the all-reduce out and the next step's first reduction
// counted it as a wait for communication (exposed > the collectives' time in most steps
// of a 2-rank profile). Here a 150 ms task stands for the all-reduce.
TEST(Timeline, AStepEndsWhenTheComputeStreamHasRunWhatTheTrainerQueued) {
  Context ctx = testing::single_rank_context();
  EngineOptions o;
  o.trace = true;
  Engine engine(ctx, o);
  const Param w = *engine.add_param("w", {4}, Init::constant(1.0f));
  ASSERT_TRUE(engine.finalize().ok());
  ASSERT_TRUE(engine.mark(TimelineEvent::Kind::kIterationBegin).ok());
  float* g = engine.grad_as<float>(w);
  ASSERT_NE(g, nullptr);
  std::fill(g, g + 4, 0.5f);
  ASSERT_TRUE(engine.grad_ready(w).ok());
  ASSERT_TRUE(engine.step().ok());
  ASSERT_TRUE(engine.compute_stream()
                  .enqueue_host("the trainer's all-reduce",
                                [] {
                                  std::this_thread::sleep_for(std::chrono::milliseconds(150));
                                  return Status::Ok();
                                })
                  .ok());
  ASSERT_TRUE(engine.mark(TimelineEvent::Kind::kIterationEnd).ok());
  const StatusOr<std::vector<TimelineEvent>> events = engine.timeline();  // waits for the streams
  ASSERT_TRUE(events.ok()) << events.status().to_string();
  double begin = -1, end = -1, last_engine = -1;
  for (const TimelineEvent& e : *events) {
    if (e.kind == TimelineEvent::Kind::kIterationBegin) begin = e.seconds;
    if (e.kind == TimelineEvent::Kind::kIterationEnd) end = e.seconds;
    if (e.kind != TimelineEvent::Kind::kIterationBegin && e.kind != TimelineEvent::Kind::kIterationEnd) {
      last_engine = std::max(last_engine, e.seconds);
    }
  }
  ASSERT_GT(begin, 0);
  ASSERT_GT(end, 0);
  ASSERT_GE(last_engine, begin) << "step() recorded no point";
  EXPECT_GE(end - last_engine, 0.14) << "the step's end came before the trainer's queued work ran";
  EXPECT_LT(end - begin, 5.0);
}

}  // namespace
}  // namespace zdp
