// A profiled dp-train run at K = 2 on the CPU (real rank processes, Gloo): the files rank 0
// writes (trace.json, profile.jsonl, memory.svg) have the promised shape, each step's named
// parts add up to its measured time within 5%, and the straggler report names the rank the
// test slows down (ZDP_PROFILE_TEST_DELAY).
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "testing/single_rank.h"
#include "trainer/loop/profiling.h"
#include "trainer/loop/train_loop.h"
#include "zdp/context.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kSteps = 8;
constexpr int kWarmup = 2;

// The mlp (d 64, 2 hidden layers, 10 classes: Psi = 2 x (64 x 64 + 64) + 10 x 64 + 10 =
// 8970) at stage 3, so that the timeline has every kind of point: layer-group gathers
// waited for in forward, reductions during backward, the optimizer, the norm.
constexpr int64_t kPsi = 2 * (64 * 64 + 64) + 10 * 64 + 10;

Config profiled_config(const fs::path& dir) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 2;
  c.model.d_model = 64;
  c.model.vocab_size = 10;
  c.train.global_batch = 16;
  c.train.micro_batch = 4;  // accum_steps 2 at K = 2
  c.train.steps = kSteps;
  c.train.log_every = 1000;
  c.train.eval_samples = 8;
  c.zero.stage = 3;
  c.zero.bucket_mb = 0.01;  // several buckets per layer group
  c.profile.enabled = true;
  c.profile.warmup_steps = kWarmup;
  c.profile.dir = dir.string();
  return c;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ProfiledRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zdp_profile_run_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains on K = 2 forked ranks; rank 1 sleeps `delay_ms` per micro-batch's backward.
  // Returns rank 0's console.
  std::string run(int delay_ms, const std::function<void(Config&)>& edit = nullptr) {
    Config config = profiled_config(dir_);
    if (edit) edit(config);
    const fs::path console = dir_ / "console.txt";
    auto results = testing::fork_ranks(2, [&](int rank, int k, Store& store) -> Status {
      ::setenv("ZDP_PROFILE_TEST_DELAY", ("rank=1,ms=" + std::to_string(delay_ms)).c_str(), 1);
      ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, 1, config));
      std::FILE* out = std::fopen(rank == 0 ? console.c_str() : "/dev/null", "w");
      StatusOr<TrainSummary> s = train(ctx, config, {out});
      std::fclose(out);
      return s.status();
    });
    EXPECT_EQ(testing::describe_failures(results), "");
    return read_file(console);
  }

  fs::path dir_;
};

TEST_F(ProfiledRun, TraceSummaryAndStragglerAtK2) {
  const std::string console = run(/*delay_ms=*/30);

  // trace.json: per rank a compute and a comm lane; forward/backward/optimizer on the
  // compute lane every measured step; every bucket collective on the comm lane with its
  // bytes, the reduce-scatters of a step covering the padded parameters once.
  const json trace = json::parse(read_file(dir_ / "trace.json"));
  std::map<std::pair<int, int>, std::string> lanes;
  std::map<int, std::multiset<std::string>> compute;                // rank -> event names
  std::map<std::pair<int, int>, int64_t> reduced_bytes;             // (rank, step) -> bytes
  for (const json& e : trace.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") lanes[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ASSERT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    if (e["tid"] == 0) compute[e["pid"].get<int>()].insert(e["name"].get<std::string>());
    if (e["tid"] == 1 && e["args"]["op"] == "reduce-scatter") {
      EXPECT_GE(e["args"]["bucket"].get<int>(), 0) << e.dump();
      reduced_bytes[{e["pid"], e["args"]["step"]}] += e["args"]["bytes"].get<int64_t>();
    }
    if (e["tid"] == 1 && e["args"]["op"] == "all-gather") {
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0) << e.dump();
    }
  }
  EXPECT_EQ(lanes, (std::map<std::pair<int, int>, std::string>{
                       {{0, 0}, "compute"}, {{0, 1}, "comm"}, {{1, 0}, "compute"}, {{1, 1}, "comm"}}));
  const size_t measured = kSteps - kWarmup;
  for (int rank : {0, 1}) {
    for (const char* name : {"forward", "backward", "optimizer", "reduce wait", "norm"}) {
      EXPECT_GE(compute[rank].count(name), measured) << "rank " << rank << ": " << name;
    }
    EXPECT_EQ(compute[rank].count("step 3"), 1u) << "rank " << rank;  // the first measured step
    EXPECT_EQ(compute[rank].count("step 2"), 0u) << "rank " << rank;  // warm-up left out
  }
  ASSERT_EQ(reduced_bytes.size(), 2 * measured);
  for (const auto& [key, bytes] : reduced_bytes) {
    // fp32; each bucket pads to a multiple of K x 32 elements, 5 or more buckets here.
    EXPECT_GE(bytes, 4 * kPsi) << "rank " << key.first << " step " << key.second;
    EXPECT_LT(bytes, 4 * (kPsi + 16 * 2 * 32)) << "rank " << key.first << " step " << key.second;
  }

  // profile.jsonl: one line per measured step per rank, then the summary; in each, the
  // named parts add up to the step time within 5%.
  std::vector<json> lines;
  std::ifstream in(dir_ / "profile.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 2 * measured + 1);
  for (const json& l : lines) {
    double named = 0;
    for (const auto& [part, ms] : l["parts_ms"].items()) {
      if (part != "other") named += ms.get<double>();
    }
    const double step = l["step_ms"];
    EXPECT_NEAR(named, step, 0.05 * step) << l.dump();
    if (l["type"] == "step") {
      EXPECT_GT(l["memory"]["params"]["current"].get<int64_t>(), 0) << l.dump();
      EXPECT_FALSE(l["collectives"].empty()) << l.dump();
    }
  }
  const json& summary = lines.back();
  EXPECT_EQ(summary["type"], "summary");
  EXPECT_EQ(summary["steps"], measured);
  EXPECT_NEAR(summary["named_ms"].get<double>(), summary["step_ms"].get<double>(), 0.05 * summary["step_ms"].get<double>());
  // Rank 1 sleeps 2 x 30 ms per step in backward; the mlp's compute is about a millisecond.
  EXPECT_EQ(summary["slowest_rank"], 1) << summary.dump();
  EXPECT_GT(summary["ranks"][1]["compute_ms"].get<double>(), summary["ranks"][0]["compute_ms"].get<double>() + 30)
      << summary.dump();
  // Planned = dp-launch plan's model (plan_memory), which holds the engine's buffers to the byte.
  for (const json& row : summary["memory"]) {
    const std::string category = row["category"];
    // The step lines' names (the summary said "activations" for their "other").
    EXPECT_TRUE(lines.front()["memory"].contains(category) || category == "total") << category;
    if (category == "params" || category == "grads" || category == "optimizer" || category == "buckets") {
      EXPECT_EQ(row["planned"], row["measured"]) << row.dump();
    }
  }
  const double hidden = summary["hidden_by_overlap"];
  EXPECT_GE(hidden, 0.0);
  EXPECT_LE(hidden, 1.0);

  // The console summary and the plot.
  EXPECT_NE(console.find("slowest: rank 1"), std::string::npos) << console;
  EXPECT_NE(console.find("step time"), std::string::npos) << console;
  EXPECT_NE(console.find((dir_ / "trace.json").string()), std::string::npos) << console;
  const std::string svg = read_file(dir_ / "memory.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  for (const char* label : {"stage 0", "stage 3", "rank 0", "rank 1"}) EXPECT_NE(svg.find(label), std::string::npos) << label;
}

// At stage 3 an evaluation gathers every layer group; its collectives were counted in the
// next step's communication (34 collectives instead of 10, "communication 33.7 ms per step"
// for a 16 ms step). Now every measured step has the same collectives, evaluated after or not.
TEST_F(ProfiledRun, EvaluationsAreNoStepsCommunication) {
  run(/*delay_ms=*/0, [](Config& c) { c.train.eval_every = 2; });
  std::map<int64_t, size_t> collectives;  // rank 0's, per step
  std::map<int64_t, json> peaks;          // rank 0's memory peaks by category, per step
  std::ifstream in(dir_ / "profile.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json l = json::parse(line);
    if (l["type"] != "step" || l["rank"] != 0) continue;
    collectives[l["step"].get<int64_t>()] = l["collectives"].size();
    for (const auto& [category, m] : l["memory"].items()) peaks[l["step"].get<int64_t>()][category] = m["peak"];
  }
  // Nor is an evaluation's memory: its peak was counted in the next step's (the profiler
  // reset peaks at end_step, before the evaluation; now at the step's begin_step).
  for (const auto& [step, p] : peaks) {
    EXPECT_EQ(p, peaks.begin()->second) << "step " << step << " (evaluated after steps 2, 4, 6)";
  }
  ASSERT_EQ(collectives.size(), static_cast<size_t>(kSteps - kWarmup));
  EXPECT_EQ(collectives.begin()->first, kWarmup + 1) << "steps are counted from 1";
  for (const auto& [step, n] : collectives) {
    EXPECT_EQ(n, collectives.begin()->second) << "step " << step << " (evaluated after steps 2, 4, 6)";
  }
}

// The GPT at stage 3 keeps the tied embedding's group open inside the head's: one more
// gathered-layer buffer than 1 + prefetch_layers. The pool grew by it during the first
// step, beyond the plan and the memory table (quickstart: buckets 2.561 MiB planned, 2.987
// measured); dp-train now plans it (EngineOptions::nested_layer_scopes).
TEST_F(ProfiledRun, TheGptAtStageThreeUsesTheBuffersItPlanned) {
  run(/*delay_ms=*/0, [](Config& c) {
    c.model.kind = ModelKind::kGpt;
    c.model.n_layers = 2, c.model.d_model = 32, c.model.n_heads = 2, c.model.vocab_size = 64, c.model.seq_len = 16;
    c.data.kind = DataKind::kSynthetic;
  });
  std::ifstream in(dir_ / "profile.jsonl");
  json summary;
  for (std::string line; std::getline(in, line);) {
    const json l = json::parse(line);
    if (l["type"] == "summary") summary = l;
  }
  ASSERT_TRUE(summary.is_object());
  bool found = false;
  for (const json& m : summary["memory"]) {
    if (m["category"] != "buckets") continue;
    found = true;
    EXPECT_EQ(m["measured"], m["planned"]) << m.dump();
    EXPECT_EQ(m["peak"], m["planned"]) << m.dump();
  }
  EXPECT_TRUE(found) << summary.dump();
}

// A run without profile.trace (or profile.kernels) leaves no earlier run's trace.json or
// kernels.json beside its own profile.jsonl, where they read as this run's (plan
// --from-profile combined an old kernels.json with a new profile.jsonl).
TEST_F(ProfiledRun, AnEarlierRunsTraceAndKernelTimesDoNotOutliveIt) {
  for (const char* name : {"trace.json", "kernels.json"}) std::ofstream(dir_ / name) << "{\"earlier\": true}\n";
  run(/*delay_ms=*/0, [](Config& c) { c.profile.trace = false; });
  EXPECT_TRUE(fs::exists(dir_ / "profile.jsonl"));
  EXPECT_FALSE(fs::exists(dir_ / "trace.json"));
  EXPECT_FALSE(fs::exists(dir_ / "kernels.json"));
  // The next run without profiling leaves them, and says that they are an earlier run's.
  const std::string console = run(/*delay_ms=*/0, [](Config& c) { c.profile.enabled = false; });
  EXPECT_TRUE(fs::exists(dir_ / "profile.jsonl"));
  EXPECT_NE(console.find("profile: profile.jsonl, memory.svg in " + dir_.string() +
                         " are an earlier run's (profile.enabled = false here), left as they were"),
            std::string::npos)
      << console;
}

// A run measured over all its steps keeps the newest whole steps within max_kept_points
// (it kept every point, and past 48 MiB of them failed at its end without a summary).
// `steps` profiled steps of a one-parameter engine on ctx, max_kept_points 200; rank 0
// returns the steps profile.jsonl kept (its own), in order.
std::vector<int64_t> kept_steps(Context& ctx, const fs::path& dir, int steps) {
  EngineOptions o;
  o.trace = true;
  Engine engine(ctx, o);
  const Param p = *engine.add_param("w", {64}, Init::constant(1.0f));
  EXPECT_TRUE(engine.finalize().ok());
  ProfileOptions po;
  po.dir = dir.string();
  po.warmup_steps = 0;
  po.trace = false;
  po.out = nullptr;
  po.max_kept_points = 200;
  Profiler profiler(ctx, engine, po);
  for (int step = 0; step < steps; ++step) {
    EXPECT_TRUE(engine.mark(TimelineEvent::Kind::kIterationBegin).ok());
    float* g = engine.grad_as<float>(p);
    for (int i = 0; g != nullptr && i < 64; ++i) g[i] = 0.01f;
    EXPECT_TRUE(engine.grad_ready(p).ok());
    EXPECT_TRUE(engine.step().ok());
    EXPECT_TRUE(engine.mark(TimelineEvent::Kind::kIterationEnd).ok());
    profiler.end_step();
  }
  EXPECT_TRUE(profiler.finish().ok());
  std::vector<int64_t> kept;
  std::ifstream in(dir / "profile.jsonl");
  for (std::string line; ctx.rank() == 0 && std::getline(in, line);) {
    const json l = json::parse(line);
    if (l["type"] == "step" && l["rank"] == 0) kept.push_back(l["step"].get<int64_t>());
  }
  return kept;
}

TEST(ProfilerWindow, KeepsTheNewestWholeStepsWithinItsBound) {
  const fs::path dir = fs::temp_directory_path() / ("zdp_profile_window_" + std::to_string(::getpid()));
  InitOptions init_options;
  init_options.backend = Backend::kGloo;
  StatusOr<Context> ctx = init(init_options);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  constexpr int kRun = 30;
  const std::vector<int64_t> steps = kept_steps(*ctx, dir, kRun);
  fs::remove_all(dir);
  ASSERT_FALSE(steps.empty());
  EXPECT_LT(steps.size(), static_cast<size_t>(kRun)) << "every step was kept";
  EXPECT_EQ(steps.back(), kRun) << "the newest step is kept";
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i], steps[i - 1] + 1) << "whole steps, in order";

  // The bound is the job's: at 2 ranks each keeps half as many points (each kept the whole
  // bound, and rank 0 gathered K times it).
  const fs::path two = dir.string() + "_2";
  const std::string counts = (two / "count").string();
  fs::create_directories(two);
  EXPECT_EQ(testing::describe_failures(testing::fork_ranks(2, [&](int rank, int k, Store& store) -> Status {
              ZDP_ASSIGN_OR_RETURN(Context c, testing::make_test_context(rank, k, store));
              const std::vector<int64_t> kept = kept_steps(c, two, kRun);
              if (rank == 0) std::ofstream(counts) << kept.size();
              return Status::Ok();
            })),
            "");
  size_t at_two = 0;
  std::ifstream(counts) >> at_two;
  fs::remove_all(two);
  EXPECT_GT(at_two, 0u);
  EXPECT_LE(at_two, (steps.size() + 1) / 2) << "one rank kept " << steps.size() << " steps";
}

// A profile whose files cannot be written still prints its summary, then fails naming the
// folder (the whole report was lost at the end of the run that measured it); and a
// profiler without a folder is refused when it is made, not at finish().
TEST(ProfilerOutput, AFolderThatCannotBeWrittenStillPrintsTheSummary) {
  const fs::path dir = fs::temp_directory_path() / ("zdp_profile_unwritable_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "not-a-folder") << "x";
  Context ctx = testing::single_rank_context();
  EngineOptions o;
  o.trace = true;
  Engine engine(ctx, o);
  const Param p = *engine.add_param("w", {64}, Init::constant(1.0f));
  ProfileOptions po;
  po.warmup_steps = 0;
  po.dir = dir.string();
  // Before finalize() it is refused (it profiled nothing and blamed the warm-up at finish()).
  try {
    Profiler early(ctx, engine, po);
    ADD_FAILURE() << "a profiler of an engine not finalized";
  } catch (const Error& e) {
    EXPECT_NE(e.status().message().find("the engine is not finalized"), std::string::npos) << e.status().message();
  }
  ASSERT_TRUE(engine.finalize().ok());
  po.dir.clear();
  EXPECT_THROW(Profiler(ctx, engine, po), Error);
  po.dir = (dir / "not-a-folder" / "profile").string();
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  po.out = out;
  Profiler profiler(ctx, engine, po);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(engine.mark(TimelineEvent::Kind::kIterationBegin).ok());
    float* g = engine.grad_as<float>(p);
    ASSERT_NE(g, nullptr);
    for (int i = 0; i < 64; ++i) g[i] = 0.01f;
    ASSERT_TRUE(engine.grad_ready(p).ok());
    ASSERT_TRUE(engine.step().ok());
    ASSERT_TRUE(engine.mark(TimelineEvent::Kind::kIterationEnd).ok());
    profiler.end_step();
  }
  const StatusOr<ProfileSummary> done = profiler.finish();
  std::string printed(1 << 16, '\0');
  std::rewind(out);
  printed.resize(std::fread(printed.data(), 1, printed.size(), out));
  std::fclose(out);
  fs::remove_all(dir);
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("not-a-folder"), std::string::npos) << done.status().to_string();
  EXPECT_NE(printed.find("throughput: "), std::string::npos) << printed;
  EXPECT_EQ(printed.find("JSON lines "), std::string::npos) << "a file that was not written is named:\n" << printed;
}

// A rank that has no measurements to send (its timeline could not be read, or too many
// to carry) leaves its reason under its key: rank 0 names it at once. It returned without
// a word, and rank 0 waited out the collective timeout for "rank 1's measurements".
TEST(ProfilerOutput, ARankWithoutMeasurementsIsNamedByRankZeroAtOnce) {
  const fs::path dir = fs::temp_directory_path() / ("zdp_profile_missing_" + std::to_string(::getpid()));
  const auto start = std::chrono::steady_clock::now();
  const auto results = testing::fork_ranks(2, [&](int rank, int k, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store));
    EngineOptions o;
    o.trace = true;
    Engine engine(ctx, o);
    ZDP_RETURN_IF_ERROR(engine.add_param("w", {64}, Init::constant(1.0f)).status());
    ZDP_RETURN_IF_ERROR(engine.finalize());
    ProfileOptions po;
    po.dir = dir.string();
    // A first profiler that both ranks finish (its outcome aside): the second reads the
    // second's keys, not rank 1's measurements left by the first (fixed keys did).
    (void)Profiler(ctx, engine, po).finish();
    if (rank == 1) return ctx.store().set("profile/2/rank/1", "zdp-profile-failed: rank 1: its stream failed");
    Profiler profiler(ctx, engine, po);
    const StatusOr<ProfileSummary> done = profiler.finish();
    if (done.ok()) return Status(StatusCode::kInternal, "finish() passed without rank 1's measurements");
    return done.status().message().find("rank 1 sent no measurements: rank 1: its stream failed") == std::string::npos
               ? Status(StatusCode::kInternal, "rank 0 said: " + done.status().message())
               : Status::Ok();
  });
  fs::remove_all(dir);
  EXPECT_EQ(testing::describe_failures(results), "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "rank 0 waited out a timeout";
}

TEST(ProfileTestHook, ParsesRankAndMillisecondsAndRefusesAnythingElse) {
  ::setenv("ZDP_PROFILE_TEST_DELAY", "rank=1,ms=30", 1);
  EXPECT_EQ(profile_test_delay(1).value(), 30ms);
  EXPECT_EQ(profile_test_delay(0).value(), 0ms);
  ::setenv("ZDP_PROFILE_TEST_DELAY", "rank1 30ms", 1);
  EXPECT_FALSE(profile_test_delay(1).ok());
  ::unsetenv("ZDP_PROFILE_TEST_DELAY");
  EXPECT_EQ(profile_test_delay(1).value(), 0ms);
}

}  // namespace
}  // namespace zdp::trainer
