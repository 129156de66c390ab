// The engine's API contracts in one process (zdp::init() with no launcher: a world of 1):
// option checks and EngineOptions::from(config), misuse reported with the parameter and
// the micro-batch, weight-decay rules, initialisation, and stage-3 views outside a scope.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "testing/optim_reference.h"
#include "testing/tolerance.h"
#include "testing/single_rank.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp {
namespace {

void expect_error(const Status& s, const std::string& part) {
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(part), std::string::npos) << s.to_string();
}

Context single() { return testing::single_rank_context(); }

TEST(Init, WithoutALauncherIsAWorldOfOne) {
  Context ctx = single();
  EXPECT_EQ(ctx.rank(), 0);
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_EQ(ctx.device().kind(), DeviceKind::kCpu);
  EXPECT_STREQ(ctx.comm().backend(), "gloo");
  EXPECT_EQ(ctx.config(), *parse_config("", "<defaults>"));
}

// ZDP_BACKEND is auto, gloo or nccl: "NCCL" or a typo ran Gloo without a word.
TEST(Init, AnUnknownZdpBackendIsRefused) {
  ::setenv("ZDP_BACKEND", "NCCL", 1);
  StatusOr<Context> ctx = init(InitOptions{});
  ::unsetenv("ZDP_BACKEND");
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("ZDP_BACKEND='NCCL' is not auto, gloo or nccl"), std::string::npos)
      << ctx.status().to_string();
  ::setenv("ZDP_BACKEND", "gloo", 1);
  StatusOr<Context> gloo = init(InitOptions{});
  ::unsetenv("ZDP_BACKEND");
  ASSERT_TRUE(gloo.ok()) << gloo.status().to_string();
  EXPECT_STREQ(gloo->comm().backend(), "gloo");
}

TEST(Options, ValidateNamesEveryBadField) {
  EngineOptions o;
  o.zero.stage = 4;
  o.zero.bucket_mb = 0;
  o.zero.reduce_dtype = DType::kF16;
  o.accum_steps = 0;
  o.loss_scale.backoff = 2.0;
  const Status s = o.validate();
  // [zero] is checked by the config's key table: its messages name the keys.
  for (const char* part : {"zero.stage = 4", "zero.bucket_mb = 0", "zero.reduce_dtype = \"fp16\"", "accum_steps 0",
                           "loss scale"}) {
    expect_error(s, part);
  }
  EXPECT_TRUE(EngineOptions().validate().ok());
}

TEST(Options, FromConfigReadsZeroOptimTrainAndModelDtype) {
  StatusOr<Config> config = parse_config(
      "[zero]\nstage = 3\nbucket_mb = 4.0\nreduce_dtype = \"bf16\"\noverlap = false\nprefetch_layers = 2\n"
      "[model]\ndtype = \"bf16\"\n[train]\nglobal_batch = 32\nmicro_batch = 2\nsteps = 50\nseed = 9\n"
      "[optim]\nlr = 0.001\ngrad_clip = 0.5\n",
      "test.toml");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  StatusOr<EngineOptions> o = EngineOptions::from(*config, 4);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->zero.stage, 3);
  EXPECT_EQ(o->zero.bucket_mb, 4.0);
  EXPECT_EQ(o->compute_dtype, DType::kBF16);
  EXPECT_EQ(o->zero.reduce_dtype, DType::kBF16);
  EXPECT_FALSE(o->zero.overlap);
  EXPECT_EQ(o->zero.prefetch_layers, 2);
  EXPECT_EQ(o->accum_steps, 4);  // 32 / (2 x 4 ranks)
  EXPECT_EQ(o->total_steps, 50);
  EXPECT_EQ(o->global_batch, 32);
  EXPECT_EQ(o->seed, 9);
  EXPECT_EQ(o->optim.grad_clip, 0.5);
  // The batch-size rule is applied by from(), once.
  StatusOr<Config> scaled = parse_config("[optim]\nlr = 0.01\nmin_lr = 0.001\nlr_scaling = \"linear\"\nbase_batch = 4\n"
                                         "[train]\nglobal_batch = 16\n", "scaled.toml");
  ASSERT_TRUE(scaled.ok()) << scaled.status().to_string();
  StatusOr<EngineOptions> s = EngineOptions::from(*scaled, 1);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_DOUBLE_EQ(s->optim.lr, 0.04);
  EXPECT_DOUBLE_EQ(s->optim.min_lr, 0.004);
  EXPECT_EQ(s->optim.lr_scaling, LrScalingRule::kNone);
  // A batch that does not divide over the ranks is the config's error, naming the values.
  expect_error(EngineOptions::from(*config, 3).status(), "global_batch");
}

TEST(Options, LrScalingFollowsTheGlobalBatch) {
  Context ctx = single();
  auto lr_of_first_step = [&](LrScalingRule rule, int64_t base, int64_t global) {
    EngineOptions o;
    o.optim.lr = 0.01;
    o.optim.lr_scaling = rule;
    o.optim.base_batch = base;
    o.global_batch = global;
    Engine engine(ctx, o);
    const Param p = *engine.add_param("w", {4}, Init::zeros());
    EXPECT_TRUE(engine.finalize().ok());
    std::fill_n(engine.grad_as<float>(p), 4, 1.0f);
    EXPECT_TRUE(engine.grad_ready(p).ok());
    return engine.step()->lr;
  };
  EXPECT_DOUBLE_EQ(lr_of_first_step(LrScalingRule::kNone, 8, 32), 0.01);
  EXPECT_DOUBLE_EQ(lr_of_first_step(LrScalingRule::kLinear, 8, 32), 0.04);
  EXPECT_DOUBLE_EQ(lr_of_first_step(LrScalingRule::kSqrt, 8, 32), 0.02);
  EXPECT_DOUBLE_EQ(lr_of_first_step(LrScalingRule::kLinear, 0, 32), 0.01);  // base 0: tuned at this batch
  EngineOptions missing;
  missing.optim.lr_scaling = LrScalingRule::kLinear;
  expect_error(missing.validate(), "lr_scaling linear needs global_batch");
}

TEST(Registration, ErrorsNameTheParameter) {
  Context ctx = single();
  Engine engine(ctx, EngineOptions());
  ASSERT_TRUE(engine.add_param("a.weight", {4, 4}, Init::zeros(), 1).ok());
  expect_error(engine.add_param("a.weight", {4}, Init::zeros(), 1).status(), "add_param('a.weight'): the name is taken by parameter #0");
  expect_error(engine.add_param("b.weight", {4}, Init::zeros(), 0).status(), "layer group 0 after 'a.weight'");
  Engine bad_shape(ctx, EngineOptions());
  expect_error(bad_shape.add_param("c", {0, 4}, Init::zeros()).status(), "add_param('c' [0, 4]): dimension 0");
  ASSERT_TRUE(engine.finalize().ok());
  expect_error(engine.add_param("late", {1}, Init::zeros()).status(), "finalized already");
  expect_error(engine.finalize(), "called twice");
}

// Two parameters in one layer group; micro() writes gradient `g` everywhere.
struct Tiny {
  Engine engine;
  Param p, q;
  Tiny(Context& ctx, EngineOptions o) : engine(ctx, o) {
    p = *engine.add_param("w", {2, 3}, Init::constant(1.0f));
    q = *engine.add_param("v", {4}, Init::constant(1.0f));
    Status s = engine.finalize();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  Status micro(float g) {
    for (Param x : {p, q}) {
      float* grad = engine.grad_as<float>(x);
      if (grad == nullptr) return Status(StatusCode::kInternal, "no grad view");
      for (int i = 0; i < (x.index == p.index ? 6 : 4); ++i) grad[i] = g;
      ZDP_RETURN_IF_ERROR(engine.grad_ready(x));
    }
    return Status::Ok();
  }
};

// add_param refuses what finalize() used to find, naming the parameter (api.md).
TEST(Registration, AddParamRefusesShapesLayersAndInitsItCannotHold) {
  Context ctx = single();
  Engine engine(ctx, EngineOptions{});
  auto refused = [&](const std::string& name, const std::vector<int64_t>& shape, Init init, int layer,
                     const std::string& says) {
    StatusOr<Param> p = engine.add_param(name, shape, init, layer);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(says), std::string::npos) << p.status().message();
  };
  refused("", {3}, Init::zeros(), 0, "the name is empty");
  refused("a", {}, Init::zeros(), 0, "add_param('a' []): the shape has no dimension");
  refused("b", {4, 0}, Init::zeros(), 0, "dimension 0 is not positive");
  refused("c", {-1}, Init::zeros(), 0, "dimension -1 is not positive");
  refused("d", {3}, Init::zeros(), -1, "layer group -1 is not in [0, 1073741824]");
  refused("d", {3}, Init::zeros(), std::numeric_limits<int>::max(), "layer group 2147483647 is not in");
  refused("a\nb", {3}, Init::zeros(), 0, "the name holds a control character (byte 1)");
  refused("e", {3}, Init::uniform(1, 0), 0, "a uniform with low <= high");
  refused("f", {3}, Init::normal(-1), 0, "a normal with std >= 0");
  refused("g", {3}, Init::constant(std::numeric_limits<float>::quiet_NaN()), 0, "not a finite constant");
  EXPECT_TRUE(engine.add_param("ok", {3}, Init::uniform(0, 0), 0).ok());
  EXPECT_TRUE(engine.finalize().ok()) << "a refused add_param is no failure of the engine";
}

TEST(Steps, MisuseIsReportedWithTheParameterAndTheMicroBatch) {
  Context ctx = single();
  EngineOptions o;
  o.accum_steps = 2;
  Tiny t(ctx, o);
  expect_error(t.engine.step().status(), "after 0 of 2 micro-batches");
  ASSERT_TRUE(t.micro(1.0f).ok());
  expect_error(t.engine.step().status(), "after 1 of 2 micro-batches");
  ASSERT_TRUE(t.micro(1.0f).ok());
  expect_error(t.engine.grad_ready(t.p), "grad_ready('w' [2, 3]): all 2 micro-batches of step 1 are complete");
  ASSERT_TRUE(t.engine.step().ok());
  ASSERT_NE(t.engine.grad(t.p), nullptr);
  ASSERT_TRUE(t.engine.grad_ready(t.p).ok());
  expect_error(t.engine.grad_ready(t.p), "grad_ready('w' [2, 3]): called twice in micro-batch 0 of step 2");
  expect_error(t.engine.step().status(), "after 0 of 2 micro-batches; not marked ready in the current one: 'v' [4]");
}

TEST(Steps, StageThreeViewsExistOnlyInsideTheirLayerScope) {
  Context ctx = single();
  EngineOptions o;
  o.zero.stage = 3;
  Tiny t(ctx, o);
  {
    StatusOr<Engine::LayerScope> scope = t.engine.layer(0);
    ASSERT_TRUE(scope.ok());
    ASSERT_NE(t.engine.param_as<float>(t.p), nullptr);
    EXPECT_EQ(t.engine.param_as<float>(t.p)[5], 1.0f);
  }
  // nullptr outside, as documented, and not a failure: the engine goes on (it was sticky,
  // and the rank's next step failed while its peers waited for it).
  EXPECT_EQ(t.engine.param(t.p), nullptr);
  EXPECT_TRUE(t.engine.error().ok()) << t.engine.error().to_string();
  {
    StatusOr<Engine::LayerScope> scope = t.engine.layer(0);
    ASSERT_TRUE(scope.ok()) << scope.status().to_string();
    EXPECT_NE(t.engine.param(t.p), nullptr);
    expect_error(t.engine.step().status(), "inside a scope of layer group 0");
  }
  for (int stage : {0, 2}) {  // counted at every stage (stages 0-2 let step() pass)
    o.zero.stage = stage;
    Tiny s(ctx, o);
    StatusOr<Engine::LayerScope> open = s.engine.layer(0);
    expect_error(s.engine.step().status(), "inside a scope of layer group 0");
  }
}

// A layer group that is only prefetched holds its gather buffer while the all-gather may
// still be writing it: no view until its own scope orders the compute stream after it.
TEST(Steps, StageThreeGivesNoViewOfAPrefetchedLayerGroup) {
  Context ctx = single();
  EngineOptions o;
  o.zero.stage = 3;
  o.zero.prefetch_layers = 1;
  Engine engine(ctx, o);
  const Param first = *engine.add_param("l0.w", {8}, Init::constant(1.0f), 0);
  const Param second = *engine.add_param("l1.w", {8}, Init::constant(2.0f), 1);
  ASSERT_TRUE(engine.finalize().ok());
  {
    StatusOr<Engine::LayerScope> scope = engine.layer(0);  // prefetches layer group 1
    ASSERT_TRUE(scope.ok()) << scope.status().to_string();
    EXPECT_NE(engine.param(first), nullptr);
    EXPECT_EQ(engine.param(second), nullptr) << "a view of a buffer its all-gather may still be writing";
  }
  {
    StatusOr<Engine::LayerScope> scope = engine.layer(1);
    ASSERT_TRUE(scope.ok()) << scope.status().to_string();
    ASSERT_NE(engine.param_as<float>(second), nullptr);
    EXPECT_EQ(engine.param_as<float>(second)[7], 2.0f);
  }
  EXPECT_TRUE(engine.error().ok()) << engine.error().to_string();
}

// At every stage: at stages 0-1 the view is the reduced buffer, and a grad_ready() with no
// view applied the last step's sum again (a review measured norms 4, 8, 16 at stage 0).
TEST(Steps, GradReadyWithoutAGradViewAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    Context ctx = single();
    EngineOptions o;
    o.zero.stage = stage;
    Tiny t(ctx, o);
    expect_error(t.engine.grad_ready(t.p), "grad_ready('w' [2, 3]): grad() was not called for it");
  }
}

// The same when another parameter of its gradient group took the group's staging slot:
// 'w''s range then held the slot's last gradient, and it was applied without a word.
TEST(Steps, GradReadyWithoutAGradViewIsCaughtWhenItsGroupHasASlot) {
  for (int stage : {2, 3}) {
    Context ctx = single();
    EngineOptions o;
    o.zero.stage = stage;
    Tiny t(ctx, o);
    ASSERT_TRUE(t.micro(1.0f).ok());
    ASSERT_TRUE(t.engine.step().ok());
    ASSERT_NE(t.engine.grad(t.q), nullptr);  // the group's slot is taken, for 'v' only
    ASSERT_TRUE(t.engine.grad_ready(t.q).ok());
    expect_error(t.engine.grad_ready(t.p), "grad_ready('w' [2, 3]): grad() was not called for it");
  }
}

TEST(Steps, AGradViewAfterGradReadyIsRefused) {
  for (int stage : {2, 3}) {  // stages 0-1: the view is the parameter's buffer, readable until step()
    Context ctx = single();
    EngineOptions o;
    o.zero.stage = stage;
    o.accum_steps = 2;
    Tiny t(ctx, o);
    ASSERT_NE(t.engine.grad(t.p), nullptr);
    ASSERT_TRUE(t.engine.grad_ready(t.p).ok());
    EXPECT_EQ(t.engine.grad(t.p), nullptr) << "stage " << stage;
    expect_error(t.engine.error(), "grad('w' [2, 3]): called after grad_ready() in micro-batch 0 of step 1");
  }
}

// Invalid options name the rank and the call on a world of one too (the registration
// check, which names them on every rank of a larger world, returned them bare here).
TEST(Steps, InvalidOptionsNameTheRankAndFinalize) {
  Context ctx = single();
  EngineOptions o;
  o.accum_steps = 0;
  Engine engine(ctx, o);
  ASSERT_TRUE(engine.add_param("w", {4}, Init::constant(1.0f)).ok());
  expect_error(engine.finalize(), "rank 0: finalize: engine options: accum_steps 0 is not >= 1");
}

// param_as<float> of a bf16 engine read (and wrote) twice the view's length.
TEST(Steps, TypedViewsOfTheWrongWidthAreRefused) {
  Context ctx = single();
  EngineOptions o;
  o.compute_dtype = DType::kBF16;
  Engine engine(ctx, o);
  const Param p = *engine.add_param("w", {4}, Init::constant(1.0f));
  ASSERT_TRUE(engine.finalize().ok());
  EXPECT_NE(engine.param_as<uint16_t>(p), nullptr);
  EXPECT_NE(engine.grad_as<uint16_t>(p), nullptr);
  EXPECT_EQ(engine.param_as<float>(p), nullptr);
  expect_error(engine.error(), "param_as('w' [4]): an element of 4 bytes, but the compute dtype bf16's is 2");
}

// layer() of a group no parameter was registered in is an off-by-one, at every stage
// (stage 3 returned an empty scope and nullptr views; stages 0-2 said nothing).
TEST(Steps, LayerScopesOfGroupsThatDoNotExistAreRefused) {
  for (int stage : {0, 3}) {
    Context ctx = single();
    EngineOptions o;
    o.zero.stage = stage;
    Tiny t(ctx, o);  // one group: 0
    EXPECT_TRUE(t.engine.layer(0).ok());
    for (int bad : {-3, 1}) {
      StatusOr<Engine::LayerScope> scope = t.engine.layer(bad);
      ASSERT_FALSE(scope.ok()) << "stage " << stage << " layer " << bad;
      EXPECT_NE(scope.status().message().find("no such layer group (parameters were registered in groups 0..0)"),
                std::string::npos)
          << scope.status().message();
    }
  }
}

// A scope kept past its engine read freed memory when it ended (valgrind: an invalid
// read in end_scope, then a segfault); it now ends nothing. compute_stream() before
// finalize() dereferenced null.
TEST(Steps, AScopeThatOutlivesItsEngineAndAStreamBeforeFinalize) {
  Context ctx = single();
  EngineOptions o;
  o.zero.stage = 3;
  std::optional<Engine::LayerScope> kept;
  {
    Tiny t(ctx, o);
    StatusOr<Engine::LayerScope> scope = t.engine.layer(0);
    ASSERT_TRUE(scope.ok()) << scope.status().to_string();
    kept.emplace(std::move(*scope));
  }
  kept.reset();
  Engine unfinalized(ctx, o);
  EXPECT_THROW(unfinalized.compute_stream(), Error);
}

TEST(Decay, ByNameAndForcedRules) {
  Context ctx = single();
  EngineOptions o;
  o.optim.lr = 0.1;
  o.optim.weight_decay = 0.5;
  Engine engine(ctx, o);
  const Param by_name_decay = *engine.add_param("a.weight", {3}, Init::constant(1.0f));
  const Param by_name_none = *engine.add_param("a.bias", {3}, Init::constant(1.0f));
  const Param forced_none = *engine.add_param("b.weight", {3}, Init::constant(1.0f), 0, Decay::kNoDecay);
  const Param forced_decay = *engine.add_param("b.bias", {3}, Init::constant(1.0f), 0, Decay::kDecay);
  ASSERT_TRUE(engine.finalize().ok());
  for (Param p : {by_name_decay, by_name_none, forced_none, forced_decay}) {
    for (int i = 0; i < 3; ++i) engine.grad_as<float>(p)[i] = 0.0f;  // AdamW's step is 0: decay alone
    ASSERT_TRUE(engine.grad_ready(p).ok());
  }
  ASSERT_TRUE(engine.step().ok());
  const float decayed = 1.0f - 0.1f * 0.5f;  // p * (1 - lr * wd)
  EXPECT_EQ((*engine.gather_master(by_name_decay))[0], decayed);
  EXPECT_EQ((*engine.gather_master(by_name_none))[0], 1.0f);
  EXPECT_EQ((*engine.gather_master(forced_none))[0], 1.0f);
  EXPECT_EQ((*engine.gather_master(forced_decay))[0], decayed);
  EXPECT_EQ(engine.param_as<float>(forced_decay)[2], decayed);  // the compute copy follows
}

// optim.nesterov and optim.dampening reach the SGD update as torch.optim.SGD has them
// (they had no key, though the kernel has both): three steps against the float64
// reference, and each differs from classic undamped momentum.
TEST(Sgd, NesterovAndDampeningFromTheConfigAreTorchs) {
  Context ctx = single();
  for (const auto& [nesterov, dampening] : {std::pair{true, 0.0}, std::pair{false, 0.5}}) {
    EngineOptions o;
    o.optim.name = OptimizerKind::kSgd;
    o.optim.lr = 0.1, o.optim.beta1 = 0.9, o.optim.weight_decay = 0, o.optim.grad_clip = 0;
    o.optim.nesterov = nesterov, o.optim.dampening = dampening;
    Engine engine(ctx, o);
    const Param w = *engine.add_param("w", {2}, Init::constant(1.0f));
    ASSERT_TRUE(engine.finalize().ok());
    std::vector<testing::SgdRef> ref(2, testing::SgdRef{{1.0, 0.0}, {0.0, 0.0}});
    std::vector<testing::SgdRef> classic = ref;
    for (int64_t t = 1; t <= 3; ++t) {
      const float g[2] = {0.5f * static_cast<float>(t), -1.0f};
      for (int i = 0; i < 2; ++i) engine.grad_as<float>(w)[i] = g[i];
      ASSERT_TRUE(engine.grad_ready(w).ok());
      ASSERT_TRUE(engine.step().ok());
      for (int i = 0; i < 2; ++i) {
        ref[static_cast<size_t>(i)].step(g[i], t, {0.1, 0.9, dampening, 0, 1, nesterov});
        classic[static_cast<size_t>(i)].step(g[i], t, {0.1, 0.9, 0, 0, 1, false});
      }
    }
    const std::vector<float> got = *engine.gather_master(w);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(testing::within(got[i], ref[i].p.value, testing::kSafety * ref[i].p.error, static_cast<int64_t>(i)))
          << (nesterov ? "nesterov" : "dampening");
      EXPECT_GT(std::fabs(ref[i].p.value - classic[i].p.value), 1e-3) << "the variant must change the update";
    }
  }
}

TEST(Init, NormalAndUniformAreSeededByNameAndHaveTheirMoments) {
  Context ctx = single();
  auto values = [&](int64_t seed, const std::string& name, Init init) {
    EngineOptions o;
    o.seed = seed;
    Engine engine(ctx, o);
    const Param p = *engine.add_param(name, {100, 100}, init);
    EXPECT_TRUE(engine.finalize().ok());
    return *engine.gather_master(p);
  };
  const std::vector<float> a = values(1, "w", Init::normal(0.5f, 2.0f));
  EXPECT_EQ(a, values(1, "w", Init::normal(0.5f, 2.0f)));
  EXPECT_NE(a, values(2, "w", Init::normal(0.5f, 2.0f)));
  EXPECT_NE(a, values(1, "v", Init::normal(0.5f, 2.0f)));
  double sum = 0, sq = 0;
  for (float x : a) sum += x, sq += static_cast<double>(x) * x;
  const double n = static_cast<double>(a.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  // 10^4 samples: the sample mean has sd 0.5 / 100 = 0.005 and the sample sd a relative
  // sd of 1 / sqrt(2n) = 0.7%; 5 standard errors of slack.
  EXPECT_NEAR(mean, 2.0, 5 * 0.005);
  EXPECT_NEAR(sd, 0.5, 5 * 0.007 * 0.5);
  for (float x : values(3, "u", Init::uniform(-0.25f, 0.75f))) {
    ASSERT_GE(x, -0.25f);
    ASSERT_LT(x, 0.75f);
  }
}

}  // namespace
}  // namespace zdp
