// An engine that outlives its Context (destroyed, or moved from): its calls are refused
// naming the cause, and its destruction leaks its buffers instead of freeing them through
// the destroyed device (which crashed at exit: a use after free in DeviceBuffer::reset).
#include <gtest/gtest.h>

#include <optional>

#include "testing/single_rank.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

Context single() { return testing::single_rank_context(); }

constexpr const char* kGone = "the engine's Context was destroyed or moved from";

TEST(EngineLifetime, CallsAfterTheContextIsDestroyedAreRefused) {
  std::optional<Context> ctx(single());
  Engine engine(*ctx, EngineOptions{});
  const Param w = *engine.add_param("w", {4}, Init::constant(1.0f));
  ASSERT_TRUE(engine.finalize().ok());
  ctx.reset();
  EXPECT_EQ(engine.grad_as<float>(w), nullptr);
  const Status ready = engine.grad_ready(w);
  EXPECT_NE(ready.message().find(kGone), std::string::npos) << ready.to_string();
  const StatusOr<StepStats> step = engine.step();
  EXPECT_NE(step.status().message().find(kGone), std::string::npos) << step.status().to_string();
  EXPECT_NE(engine.layer(0).status().message().find(kGone), std::string::npos);
  // The calls that return no Status: memory() read the destroyed device (valgrind: an
  // invalid read), mark() and compute_stream() went on as if it lived.
  EXPECT_EQ(engine.memory().params, 0);
  EXPECT_NE(engine.mark(TimelineEvent::Kind::kIterationBegin).message().find(kGone), std::string::npos);
  EXPECT_TRUE(engine.take_timeline().empty());
  try {
    (void)engine.compute_stream();
    ADD_FAILURE() << "compute_stream() handed out a stream of the destroyed device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kGone), std::string::npos) << e.what();
  }
  // The engine goes next: no crash (its buffers are left, with an error in the log).
}

TEST(EngineLifetime, AContextMovedFromIsGoneForItsEngines) {
  Context ctx = single();
  Engine engine(ctx, EngineOptions{});
  (void)*engine.add_param("w", {4}, Init::constant(1.0f));
  Context moved = std::move(ctx);
  const Status finalized = engine.finalize();
  EXPECT_EQ(finalized.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(finalized.message().find(kGone), std::string::npos) << finalized.to_string();
  // An engine on the context it was moved into works.
  Engine fresh(moved, EngineOptions{});
  (void)*fresh.add_param("w", {4}, Init::constant(1.0f));
  EXPECT_TRUE(fresh.finalize().ok());
}

}  // namespace
}  // namespace zdp
