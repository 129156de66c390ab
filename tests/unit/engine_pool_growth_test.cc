// The gradient staging pools are planned for gradients that become ready in reverse
// registration order (backward of a model registered in forward order). Another order
// keeps more groups staged at once: the pool grows past the plan, on every step, and only
// a debug line said so. Now a warning, once, names the pool and the cause.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

struct Outcome {
  std::string log;
  int64_t measured = 0, planned = 0;  // the buckets row of Engine::memory()
};

// Two steps of three layer groups (stage 2, a bucket each) whose gradients are marked
// ready in `order`; what was logged meanwhile.
Outcome run(const std::vector<int>& order, int stage = 2, bool overlap = true) {
  InitOptions init;
  init.backend = Backend::kGloo;
  StatusOr<Context> ctx = zdp::init(init);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  EngineOptions o;
  o.zero.stage = stage;
  o.zero.overlap = overlap;
  o.zero.bucket_mb = 256.0 * 4 / (1 << 20);  // one parameter a bucket
  Engine engine(*ctx, o);
  std::vector<Param> params;
  for (int l = 0; l < 3; ++l) params.push_back(*engine.add_param("w" + std::to_string(l), {256}, Init::constant(1), l));
  EXPECT_TRUE(engine.finalize().ok());
  Outcome out;
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < 2; ++step) {
    for (int p : order) {
      float* g = engine.grad_as<float>(params[static_cast<size_t>(p)]);
      EXPECT_NE(g, nullptr);
      if (g != nullptr) std::memset(g, 0, 256 * sizeof(float));
      EXPECT_TRUE(engine.grad_ready(params[static_cast<size_t>(p)]).ok());
    }
    EXPECT_TRUE(engine.step().ok());
  }
  out.log = ::testing::internal::GetCapturedStderr();
  for (const MemoryReport::Row& row : engine.memory().rows) {
    if (row.category == "buckets") out.measured = row.measured, out.planned = row.planned;
  }
  return out;
}

TEST(EnginePoolGrowth, GradientsReadyInRegistrationOrderGrowThePoolAndSaySoOnce) {
  const Outcome backward = run({2, 1, 0});  // reverse registration: as planned
  EXPECT_EQ(backward.measured, backward.planned);
  EXPECT_EQ(backward.log.find("more than the memory plan"), std::string::npos) << backward.log;
  const Outcome forward = run({0, 1, 2});
  EXPECT_GT(forward.measured, forward.planned);
  const size_t at = forward.log.find("more than the memory plan");
  ASSERT_NE(at, std::string::npos) << forward.log;
  EXPECT_EQ(forward.log.find("more than the memory plan", at + 1), std::string::npos) << "said more than once";
}

// zero.overlap = false at stages 2-3: nothing is reduced before step(), so every group is
// staged at once. The plan said two buffers, the pool grew to three (+50% here, +215% on a
// model of eight layers) and warned of a registration order that was not the cause.
TEST(EnginePoolGrowth, WithoutOverlapEveryGroupIsStagedAsPlanned) {
  for (int stage : {2, 3}) {
    const Outcome off = run({2, 1, 0}, stage, /*overlap=*/false);
    EXPECT_EQ(off.measured, off.planned) << "stage " << stage;
    EXPECT_EQ(off.log.find("more than the memory plan"), std::string::npos) << off.log;
  }
}

// Stage 3: layer scopes nested deeper than EngineOptions::nested_layer_scopes grow the
// gathered-layer pool, and the warning names that setting (it blamed gradient order and
// zero.bucket_mb, which have nothing to do with it). Declared, nothing grows.
TEST(EnginePoolGrowth, NestedLayerScopesBeyondThePlanNameTheSetting) {
  for (const int nested : {0, 2}) {
    InitOptions init;
    init.backend = Backend::kGloo;
    StatusOr<Context> ctx = zdp::init(init);
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    EngineOptions o;
    o.zero.stage = 3;
    o.zero.prefetch_layers = 0;
    o.nested_layer_scopes = nested;
    o.zero.bucket_mb = 256.0 * 4 / (1 << 20);
    Engine engine(*ctx, o);
    for (int l = 0; l < 3; ++l) ASSERT_TRUE(engine.add_param("w" + std::to_string(l), {256}, Init::constant(1), l).ok());
    ASSERT_TRUE(engine.finalize().ok());
    ::testing::internal::CaptureStderr();
    {
      StatusOr<Engine::LayerScope> a = engine.layer(0);
      StatusOr<Engine::LayerScope> b = engine.layer(1);
      StatusOr<Engine::LayerScope> c = engine.layer(2);
      EXPECT_TRUE(a.ok() && b.ok() && c.ok());
    }
    const std::string log = ::testing::internal::GetCapturedStderr();
    if (nested == 0) {
      EXPECT_NE(log.find("gathered layers: all"), std::string::npos) << log;
      EXPECT_NE(log.find("raise nested_layer_scopes to their depth"), std::string::npos) << log;
      EXPECT_EQ(log.find("zero.bucket_mb"), std::string::npos) << log;
    } else {
      EXPECT_EQ(log.find("more than the memory plan"), std::string::npos) << log;
    }
  }
}

}  // namespace
}  // namespace zdp
