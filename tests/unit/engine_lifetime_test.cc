// An engine that outlives its Context (destroyed, or moved from): its calls are refused
// naming the cause, and its destruction leaks its buffers instead of freeing them through
// the destroyed device (which crashed at exit: a use after free in DeviceBuffer::reset).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>

#include "testing/single_rank.h"
#include "zdp/comm.h"
#include "zdp/context.h"
#include "zdp/engine.h"
#include "zdp/store.h"

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

// A layer scope kept past an engine that outlived its Context: the engine leaks its state
// (its device is gone), but the scope must still see the engine gone and end nothing (it
// called into the destroyed engine: a null dereference).
TEST(EngineLifetime, AScopeOutlivingAnEngineThatOutlivedItsContextEndsNothing) {
  std::optional<Context> ctx(single());
  std::optional<Engine::LayerScope> kept;
  {
    EngineOptions o;
    o.zero.stage = 3;
    auto engine = std::make_unique<Engine>(*ctx, o);
    (void)*engine->add_param("w", {4}, Init::constant(1.0f));
    ASSERT_TRUE(engine->finalize().ok());
    StatusOr<Engine::LayerScope> scope = engine->layer(0);
    ASSERT_TRUE(scope.ok()) << scope.status().to_string();
    kept.emplace(std::move(*scope));
    ctx.reset();
  }
  kept.reset();  // no crash
}

// Context::assemble's parts: a null one is refused at once; an env that is not the
// communicator's (a default LaunchEnv of rank 0 of 1 around another communicator) or a
// communicator on another device is refused by the engine's finalize(), naming both.
TEST(EngineLifetime, AnAssembledContextMustDescribeItsCommunicator) {
  InMemoryStore store;
  EXPECT_THROW(Context::assemble(LaunchEnv{}, Config{}, nullptr, create_cpu_device(), nullptr, std::chrono::seconds(5)),
               Error);
  std::unique_ptr<Device> device = create_cpu_device(), other = create_cpu_device();
  CommOptions co;
  co.timeout = std::chrono::seconds(5);
  std::unique_ptr<Communicator> comm = create_gloo_communicator(store, 0, 1, *other, co).value();
  Context ctx = Context::assemble(LaunchEnv{}, Config{}, std::make_unique<PrefixStore>("t", store), std::move(device),
                                  std::move(comm), co.timeout);
  Engine engine(ctx, EngineOptions{});
  (void)*engine.add_param("w", {4}, Init::constant(1.0f));
  const Status s = engine.finalize();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("its communicator rank 0 of 1, on another device"), std::string::npos) << s.to_string();
  EXPECT_THROW((void)engine.compute_stream(), Error) << "a stream of an engine whose finalize() failed";
  // A world size the options cannot be made for is refused, not divided by.
  const StatusOr<EngineOptions> none = EngineOptions::from(Config{}, 0);
  EXPECT_NE(none.status().message().find("world_size 0 is not >= 1"), std::string::npos) << none.status().to_string();
}

}  // namespace
}  // namespace zdp
