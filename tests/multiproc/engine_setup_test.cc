// The engine's set-up and bookkeeping on real rank processes (CPU, Gloo): ranks that
// register different parameters or options fail finalize() together with a message
// naming the first difference; memory per category against the ZeRO formula; overlap of
// the gradient reductions with backward (recorded timestamps), with the same results.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>

#include "testing/engine_runs.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;
using testing::fork_ranks;
using testing::make_test_context;
using testing::TinyMlp;

EngineOptions options(int stage, DType compute = DType::kF32) {
  EngineOptions o;
  o.zero.stage = stage;
  o.compute_dtype = compute;
  o.zero.reduce_dtype = compute == DType::kF32 ? DType::kF32 : DType::kBF16;
  o.zero.bucket_mb = 200.0 * 4 / (1 << 20);
  return o;
}

Status expect_contains(const Status& s, const std::vector<std::string>& parts) {
  if (s.ok()) return Status(StatusCode::kInternal, "finalize() succeeded; a mismatch was expected");
  for (const std::string& part : parts) {
    if (s.message().find(part) == std::string::npos) {
      return Status(StatusCode::kInternal, "message lacks \"" + part + "\": " + s.to_string());
    }
  }
  return Status::Ok();
}

// Registers fc0.weight, fc0.bias, fc1.weight, ... as TinyMlp does, with `tweak` applied
// to the list first.
using Spec = std::pair<std::string, std::vector<int64_t>>;
Status register_all(Engine& engine, std::vector<Spec> specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    ZDP_RETURN_IF_ERROR(engine.add_param(specs[i].first, specs[i].second, Init::normal(0.1f), static_cast<int>(i / 2)).status());
  }
  return Status::Ok();
}

std::vector<Spec> mlp_specs() {
  return {{"fc0.weight", {24, 8}}, {"fc0.bias", {24}}, {"fc1.weight", {24, 24}},
          {"fc1.bias", {24}},      {"fc2.weight", {4, 24}}, {"fc2.bias", {4}}};
}

TEST(Registration, ADifferentShapeOnOneRankFailsEveryRankNamingTheParameter) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              Engine engine(ctx, options(2));
              std::vector<Spec> specs = mlp_specs();
              if (rank == 1) specs[3].second = {25};
              ZDP_RETURN_IF_ERROR(register_all(engine, specs));
              return expect_contains(engine.finalize(), {"rank " + std::to_string(rank) + ": finalize",
                                                         "at parameter #3", "rank 0 has 'fc1.bias' [24]",
                                                         "rank 1 has 'fc1.bias' [25]"});
            })),
            "");
}

TEST(Registration, AnExtraParameterOnTheLastRankIsNamed) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(3, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              Engine engine(ctx, options(3));
              std::vector<Spec> specs = mlp_specs();
              if (rank == 2) specs.push_back({"fc2.extra", {3}});
              ZDP_RETURN_IF_ERROR(register_all(engine, specs));
              return expect_contains(engine.finalize(), {"at parameter #6", "rank 0 has nothing (6 parameters in all)",
                                                         "rank 2 has 'fc2.extra' [3]"});
            })),
            "");
}

TEST(Registration, DifferentOptionsAreCaught) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              Engine engine(ctx, options(rank == 0 ? 2 : 3));
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              return expect_contains(engine.finalize(), {"engine options differ", "rank 0 has zero.stage = 2",
                                                         "rank 1 has zero.stage = 3"});
            })),
            "");
}

// Beyond the layout's options: a learning rate that differs trained the replicas apart
// without a word, an accumulation mode that differs issued other collectives and hung.
TEST(Registration, OptimizerAndAccumulationOptionsThatDifferAreCaught) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              EngineOptions o = options(0);
              if (rank == 1) o.optim.lr = 0.5;
              Engine engine(ctx, o);
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              return expect_contains(engine.finalize(), {"engine options differ", "rank 0 has optim.lr = ",
                                                         "rank 1 has optim.lr = 0.5"});
            })),
            "");
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              EngineOptions o = options(2);
              o.accum_steps = 2;
              if (rank == 1) o.zero.accumulate = GradAccumulation::kSharded;
              Engine engine(ctx, o);
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              return expect_contains(engine.finalize(), {"rank 0 has zero.accumulate = local",
                                                         "rank 1 has zero.accumulate = sharded"});
            })),
            "");
  // SGD's Nesterov momentum (a key since stop 44) is compared too.
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              EngineOptions o = options(0);
              o.optim.name = OptimizerKind::kSgd;
              o.optim.nesterov = rank == 1;
              Engine engine(ctx, o);
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              return expect_contains(engine.finalize(), {"rank 0 has optim.nesterov = false",
                                                         "rank 1 has optim.nesterov = true"});
            })),
            "");
  // The nested scopes size stage 3's gather pool, and with it which layers stay gathered:
  // ranks that differed issued other collectives and hung in the first backward.
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              EngineOptions o = options(3);
              o.nested_layer_scopes = rank;
              Engine engine(ctx, o);
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              return expect_contains(engine.finalize(), {"rank 0 has nested_layer_scopes = 0",
                                                         "rank 1 has nested_layer_scopes = 1"});
            })),
            "");
}

// ---- memory ------------------------------------------------------------------------

// Checks one rank's report: every category's measured bytes are the planned ones (what
// plan_memory() prints for this layout); params, grads and optimizer exceed the ZeRO
// formula (docs/design.md) by padding only (grads also by `accum_extra`, the fp32
// accumulation); buckets exist only at stages 2-3; and the device's own accounting agrees
// byte for byte.
Status check_memory(Engine& engine, Device& device, int64_t accum_extra) {
  const MemoryReport m = engine.memory();
  std::map<std::string, MemoryReport::Row> rows;
  for (const MemoryReport::Row& r : m.rows) rows[r.category] = r;
  const int64_t padding = m.padded_elems - m.params;
  const int64_t c = static_cast<int64_t>(dtype_size(engine.options().compute_dtype));
  const std::map<std::string, int64_t> bytes_per_element = {{"params", c}, {"grads", c}, {"optimizer", 12}};
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kInternal, "stage " + std::to_string(m.stage) + ", " + std::to_string(m.world_size) +
                                             " ranks: " + what + "\n" + m.table());
  };
  for (const auto& [name, per_element] : bytes_per_element) {
    const MemoryReport::Row& r = rows[name];
    const int64_t model_state = r.planned - (name == "grads" ? accum_extra : 0);
    if (model_state < r.formula || model_state - r.formula > per_element * padding) {
      return bad(name + ": the plan differs from the formula by more than the padding");
    }
  }
  if ((rows["buckets"].measured > 0) != (m.stage >= 2)) return bad("buckets only at stages 2-3");
  for (MemCategory cat : {MemCategory::kParams, MemCategory::kGrads, MemCategory::kOptimizer, MemCategory::kBuckets,
                          MemCategory::kWorkspace}) {
    const MemoryReport::Row& r = rows[to_string(cat)];
    if (r.measured != r.planned) return bad(std::string(to_string(cat)) + ": measured differs from planned");
    if (device.memory().category(cat).current_bytes != r.measured) {
      return bad(std::string(to_string(cat)) + ": the device accounted " +
                 std::to_string(device.memory().category(cat).current_bytes) + " bytes");
    }
  }
  if (rows["total"].measured != rows["total"].planned) return bad("total: measured differs from planned");
  return Status::Ok();
}

// Invalid options on one rank: that rank's finalize() returned before the registration
// check, and its peers learnt only "Connection closed by peer" (or, while it lived on,
// waited out the timeout). Every rank now names the rank and its reason.
TEST(Registration, InvalidOptionsOnOneRankAreNamedOnEveryRank) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              EngineOptions o = options(2);
              if (rank == 1) o.accum_steps = 0;
              Engine engine(ctx, o);
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              const Status s = engine.finalize();
              if (rank == 1) return expect_contains(s, {"rank 1: finalize", "accum_steps 0"});
              return expect_contains(s, {"rank 0: finalize: rank 1 cannot finalize", "accum_steps 0"});
            })),
            "");
}

// A failure one rank deferred before finalize() (here a view asked for too early): that
// rank's finalize() returned before the registration check, and its peer waited out the
// collective timeout (60 s), naming nobody. Now both fail at once, naming rank 1's reason.
// An engine without parameters is refused (its step() could never end a micro-batch).
TEST(Registration, AFailureBeforeFinalizeOnOneRankIsNamedAtOnceOnEveryRank) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              Engine engine(ctx, options(2));
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              if (rank == 1 && engine.param(Param{0}) != nullptr) return Status(StatusCode::kInternal, "a view");
              const auto start = std::chrono::steady_clock::now();
              const Status s = engine.finalize();
              if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
                return Status(StatusCode::kInternal, "finalize() took the timeout: " + s.to_string());
              }
              ZDP_RETURN_IF_ERROR(expect_contains(
                  s, {rank == 1 ? "rank 1" : "rank 1 cannot finalize", "param(#0): before finalize()"}));
              Engine empty(ctx, options(2));
              return expect_contains(empty.finalize(), {"no parameters were added"});
            })),
            "");
}

// save_checkpoint with a layer scope still open on one rank: that rank returned at once,
// and the others waited out the timeout in the argument check's all-reduce. Now every
// rank fails in the first agreement, naming rank 1's reason.
TEST(Registration, ASaveOneRankCannotTakeIsNamedAtOnceOnEveryRank) {
  testing::TempDir dir;
  const std::string root = dir.path();
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [&](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              Engine engine(ctx, options(2));
              ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
              ZDP_RETURN_IF_ERROR(engine.finalize());
              std::optional<Engine::LayerScope> open;
              if (rank == 1) {
                ZDP_ASSIGN_OR_RETURN(Engine::LayerScope scope, engine.layer(0));
                open.emplace(std::move(scope));
              }
              const auto start = std::chrono::steady_clock::now();
              const StatusOr<std::string> saved = engine.save_checkpoint(root, CheckpointState{});
              if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
                return Status(StatusCode::kInternal, "save_checkpoint took the timeout: " + saved.status().to_string());
              }
              return expect_contains(saved.status(), {"rank 1", "inside a scope of layer group 0"});
            })),
            "");
}

// An engine built on one rank only and never finalized: the engines' store keys were
// numbered by a per-process count of engines built, rank 0's ran one ahead, and the
// next finalize() waited out the timeout on keys no peer wrote.
TEST(Registration, AnEngineOneRankBuiltAndDroppedDoesNotShiftTheOthers) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(2, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store, 1, {}, false, nullptr,
                                                                  std::chrono::seconds(20)));
              if (rank == 0) Engine dropped(ctx, options(2));
              for (int round = 0; round < 2; ++round) {
                Engine engine(ctx, options(2));
                ZDP_RETURN_IF_ERROR(register_all(engine, mlp_specs()));
                ZDP_RETURN_IF_ERROR(engine.finalize());
              }
              return Status::Ok();
            })),
            "");
}

TEST(Memory, PerCategoryMatchesTheZeroFormulaWithinPadding) {
  for (int world : {1, 2, 4}) {
    EXPECT_EQ(testing::describe_failures(fork_ranks(world, [](int rank, int world, Store& store) -> Status {
                ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
                for (DType dtype : {DType::kF32, DType::kBF16}) {
                  for (int stage = 0; stage <= 3; ++stage) {
                    for (int64_t accum : {1, 2}) {
                      EngineOptions o = options(stage, dtype);
                      o.accum_steps = accum;
                      Engine engine(ctx, o);
                      ZDP_RETURN_IF_ERROR(TinyMlp::create(engine).status());
                      ZDP_RETURN_IF_ERROR(engine.finalize());
                      // accum_steps > 1 keeps a full fp32 accumulation at every stage (engine.h).
                      const int64_t extra = accum > 1 ? 4 * engine.memory().padded_elems : 0;
                      ZDP_RETURN_IF_ERROR(check_memory(engine, ctx.device(), extra));
                    }
                  }
                }
                return Status::Ok();
              })),
              "")
        << world << " ranks";
  }
}

// The closing measurement of the engine's issue: a 10.5M-parameter model (5 blocks of
// 512 -> 2048 -> 512 with a norm), bf16 compute and reduction, 4 ranks; rank 0 prints its
// table for each stage (measured next to docs/design.md's formula).
TEST(Memory, TableForATenMillionParameterModelAtFourRanks) {
  EXPECT_EQ(testing::describe_failures(fork_ranks(4, [](int rank, int world, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
              for (int stage = 0; stage <= 3; ++stage) {
                EngineOptions o = options(stage, DType::kBF16);
                o.zero.bucket_mb = 4;
                Engine engine(ctx, o);
                for (int l = 0; l < 5; ++l) {
                  const std::string block = "blocks." + std::to_string(l) + ".";
                  const std::vector<Spec> specs = {{block + "fc1.weight", {2048, 512}}, {block + "fc1.bias", {2048}},
                                                   {block + "fc2.weight", {512, 2048}}, {block + "fc2.bias", {512}},
                                                   {block + "norm.weight", {512}}};
                  for (const Spec& spec : specs) {
                    ZDP_RETURN_IF_ERROR(engine.add_param(spec.first, spec.second, Init::normal(0.02f), l).status());
                  }
                }
                ZDP_RETURN_IF_ERROR(engine.finalize());
                if (rank == 0) std::printf("%s\n", engine.memory().table().c_str());
                ZDP_RETURN_IF_ERROR(check_memory(engine, ctx.device(), 0));
              }
              return Status::Ok();
            })),
            "");
}

// ---- a dying peer -------------------------------------------------------------------

TEST(Failure, APeerDyingMidStepFailsTheSurvivorQuicklyNamingTheStepAndCollective) {
  const auto results = fork_ranks(2, [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
    Engine engine(ctx, options(2));
    ZDP_ASSIGN_OR_RETURN(TinyMlp model, TinyMlp::create(engine));
    ZDP_RETURN_IF_ERROR(engine.finalize());
    const auto start = std::chrono::steady_clock::now();
    Status failed;
    for (int step = 0; step < 5 && failed.ok(); ++step) {
      if (rank == 1 && step == 2) ::_exit(0);  // gone without a word, mid-job
      failed = model.train_micro<float>(engine, step, rank * 12, 12).status();
      if (failed.ok()) failed = engine.step().status();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (failed.ok()) return Status(StatusCode::kInternal, "training went on without the peer");
    if (seconds > 20) return Status(StatusCode::kInternal, "the failure took " + std::to_string(seconds) + " s");
    return expect_contains(failed, {"rank 0: step 3", "gloo reduce_scatter"});
  });
  EXPECT_EQ(testing::describe_failures(results), "");
}

// ---- overlap -----------------------------------------------------------------------

EngineRunResult traced_run(bool overlap, bool overlap_param_gather, int stage) {
  EngineRun r;
  r.world = 2;
  r.options = options(stage);
  r.options.zero.overlap = overlap;
  r.options.overlap_param_gather = overlap_param_gather;
  r.options.trace = true;
  r.steps = 4;
  r.backward_sleep_ms = 30;  // each layer's backward takes a while: room to overlap
  EngineRunResult result = testing::run_engine(r);
  EXPECT_EQ(result.failures, "");
  return result;
}

// The first reduction of each step, in steady-clock seconds.
std::vector<double> first_reduce_starts(const EngineRunResult& r) {
  std::vector<double> first(r.stats.size(), 1e300);
  for (const TimelineEvent& e : r.timeline) {
    if (e.kind == TimelineEvent::Kind::kReduceStart && e.step < static_cast<int64_t>(first.size())) {
      first[static_cast<size_t>(e.step)] = std::min(first[static_cast<size_t>(e.step)], e.seconds);
    }
  }
  return first;
}

TEST(Overlap, TheFirstReductionStartsBeforeBackwardEndsAndResultsMatch) {
  for (int stage : {0, 2, 3}) {
    const EngineRunResult on = traced_run(true, false, stage);
    const EngineRunResult off = traced_run(false, false, stage);
    const std::vector<double> starts_on = first_reduce_starts(on), starts_off = first_reduce_starts(off);
    ASSERT_EQ(on.backward_end.size(), 4u);
    for (size_t s = 0; s < 4; ++s) {
      // Layer 0's backward (30 ms) still runs when the bucket of layers 1-2 is reduced.
      EXPECT_LT(starts_on[s], on.backward_end[s]) << "stage " << stage << ", step " << s;
      // The measurement can tell: without overlap every reduction waits for step().
      EXPECT_GT(starts_off[s], off.backward_end[s]) << "stage " << stage << ", step " << s;
    }
    // The same collectives in the same order on the same data: the same bits.
    EXPECT_EQ(testing::max_difference(on, off).value, 0.0) << "stage " << stage;
    EXPECT_EQ(testing::max_difference(traced_run(true, true, stage), off).value, 0.0)
        << "stage " << stage << " with overlap_param_gather";
  }
}

// overlap_param_gather does what it says. Its results equal the default's (above), so
// only the timeline can tell it was on: stages 1-2, step() returns with the all-gathers in
// flight and the next forward's parameter views wait for them (a kCommWaitBegin of op
// all-gather: none when step() waited); stage 3, layer 0's gather for the next step starts
// as step() returns, not when the next forward asks for it (500 ms later here).
TEST(Overlap, ParamGatherOverlapIsSeenInTheTimeline) {
  auto run = [](int stage, bool overlap) {
    EngineRun r;
    r.world = 2;
    r.options = options(stage);
    r.options.overlap_param_gather = overlap;
    r.options.trace = true;
    r.steps = 3;
    r.between_steps_sleep_ms = 500;
    EngineRunResult result = testing::run_engine(r);
    EXPECT_EQ(result.failures, "");
    return result;
  };
  auto view_waits = [](const EngineRunResult& r) {
    int n = 0;
    for (const TimelineEvent& e : r.timeline) {
      n += e.kind == TimelineEvent::Kind::kCommWaitBegin && e.op == CollectiveOp::kAllGather && e.step >= 1;
    }
    return n;
  };
  for (int stage : {1, 2}) {
    EXPECT_GT(view_waits(run(stage, true)), 0) << "stage " << stage;
    EXPECT_EQ(view_waits(run(stage, false)), 0) << "stage " << stage;
  }
  // Stage 3: from each step's end to the next step's first gather start.
  auto gather_delays = [](const EngineRunResult& r) {
    std::vector<double> step_end, delay;
    for (const TimelineEvent& e : r.timeline) {
      if (e.kind == TimelineEvent::Kind::kStepEnd) step_end.push_back(e.seconds);
    }
    for (size_t s = 0; s + 1 < step_end.size(); ++s) {
      double first = 1e300;
      for (const TimelineEvent& e : r.timeline) {
        if (e.kind == TimelineEvent::Kind::kGatherStart && e.seconds > step_end[s]) first = std::min(first, e.seconds);
      }
      delay.push_back(first - step_end[s]);
    }
    return delay;
  };
  const std::vector<double> on = gather_delays(run(3, true)), off = gather_delays(run(3, false));
  ASSERT_EQ(on.size(), 2u);
  ASSERT_EQ(off.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_LT(on[s], 0.25) << "step " << s << ": the prefetch did not start as step() returned";
    EXPECT_GT(off[s], 0.4) << "step " << s << ": a gather started before the next forward asked";
  }
}

}  // namespace
}  // namespace zdp
