// Checkpoints on real rank processes (CPU, Gloo): a save at K = 4, stage 2 resumes at
// other world sizes and stages and continues like the uninterrupted run (bit for bit at
// the same K and stage), the file holds exactly the engine's masters, node-local copies
// equal the shared one, SGD stores and restores only its momentum, damaged checkpoints and
// another optimizer's state are refused naming what and where, and a rank killed during
// a save leaves the previous checkpoint loadable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/engine_comparisons.h"
#include "testing/temp_dir.h"
#include "zdp/checkpoint.h"
#include "zdp/safetensors.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;
using ::testing::HasSubstr;
using testing::max_difference;
using testing::run_engine;
using testing::TempDir;

// Runs that differ only in how gradient sums are grouped (other K) agree to about an
// ulp of the parameters (derived in testing/engine_comparisons.h).
constexpr double kTol = testing::kRegroupingTol;
constexpr int kSteps = 20;
constexpr int kSaveAt = 10;

// The comparison jobs' options (eps = 1e-3: AdamW's step then depends on m and v's
// scale, so a lost v shows) with a schedule: the learning rate moves every step, so a
// resumed step count must be the right one.
EngineOptions options(int stage) {
  EngineOptions o = testing::comparison_options(stage);
  o.optim.schedule = LrSchedule::kCosine;
  o.optim.warmup_steps = 3;
  o.optim.min_lr = 1e-3;
  o.total_steps = kSteps;
  return o;
}

EngineRun job(int world, int stage) {
  EngineRun r;
  r.world = world;
  r.options = options(stage);
  r.steps = kSteps;
  r.save.chunk_bytes = 1024;  // several chunks per file, so ranks verify different ones
  return r;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(Checkpoint, ResumesAtAnyWorldSizeAndStage) {
  TempDir dir;
  EngineRun first = job(4, 2);
  first.save_root = dir.path();
  first.save_steps = {kSaveAt};
  const EngineRunResult full = run_engine(first);
  ASSERT_EQ(full.failures, "");

  StatusOr<CheckpointInfo> info = read_checkpoint_info(dir.path());
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state.path, dir.path() + "/step-10");
  EXPECT_EQ(info->state.step, kSaveAt);
  EXPECT_EQ(info->state.world_size, 4);
  EXPECT_EQ(info->state.stage, 2);
  EXPECT_EQ(info->state.optimizer_steps, kSaveAt);
  EXPECT_EQ(info->state.trainer_json, "{\"model\":\"tiny_mlp\"}");
  StatusOr<VerifyReport> verified = verify_checkpoint(dir.path());
  ASSERT_TRUE(verified.ok()) << verified.status().to_string();
  EXPECT_EQ(verified->files, 2);

  // model.safetensors holds exactly the masters after 10 steps, by name.
  EngineRun ten = job(4, 2);
  ten.steps = kSaveAt;
  const EngineRunResult at_save = run_engine(ten);
  ASSERT_EQ(at_save.failures, "");
  StatusOr<safetensors::Reader> model = safetensors::Reader::open(dir.path() + "/step-10/model.safetensors");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  size_t p = 0;
  for (int l = 0; l < testing::TinyMlp::kLayers; ++l) {
    for (const char* what : {"weight", "bias"}) {
      const std::string name = "fc" + std::to_string(l) + "." + what;
      const int t = model->header().find(name);
      ASSERT_GE(t, 0) << name;
      const safetensors::TensorInfo& tensor = model->header().tensors[static_cast<size_t>(t)];
      std::vector<float> values(static_cast<size_t>(tensor.numel()));
      ASSERT_TRUE(model->read(tensor.begin, values.data(), tensor.bytes()).ok());
      EXPECT_EQ(values, at_save.masters[p++]) << name;
    }
  }

  struct Resume {
    int world;
    int stage;
  };
  for (const Resume r : {Resume{4, 2}, Resume{2, 1}, Resume{1, 3}, Resume{3, 0}}) {
    EngineRun resume = job(r.world, r.stage);
    resume.load_from = dir.path();
    const EngineRunResult resumed = run_engine(resume);
    ASSERT_EQ(resumed.failures, "") << r.world << " ranks, stage " << r.stage;
    ASSERT_EQ(resumed.stats.size(), static_cast<size_t>(kSteps - kSaveAt));
    EXPECT_EQ(resumed.stats[0].lr, full.stats[kSaveAt].lr) << "the LR schedule resumes where it stopped";
    EXPECT_EQ(resumed.stats.back().step, kSteps);
    const auto d = max_difference(resumed, full);
    std::printf("resumed at %d ranks, stage %d vs uninterrupted 4 ranks, stage 2: max |difference| %.3g\n", r.world,
                r.stage, d.value);
    if (r.world == 4 && r.stage == 2) {
      EXPECT_EQ(d.value, 0.0) << "same K and stage must continue bit for bit: " << d.where;
    } else {
      EXPECT_LE(d.value, kTol) << r.world << " ranks, stage " << r.stage << ": " << d.where;
    }
  }

  // Without m, v and the step count the continuation differs by far more: the test sees
  // whether the optimizer state is restored.
  EngineRun weights_only = job(4, 2);
  weights_only.load_from = dir.path() + "/step-10";
  weights_only.load.scope = LoadScope::kWeightsOnly;
  // (the same data; the schedule restarts at step 0)
  const EngineRunResult fresh = run_engine(weights_only);
  ASSERT_EQ(fresh.failures, "");
  EXPECT_GT(max_difference(fresh, full).value, 1e-3);
}

// SGD's checkpoint holds only the state SGD keeps: "<name>.momentum_buffer" with
// momentum, no tensor without. A resume continues like the uninterrupted run (bit for
// bit at the same K and stage: a momentum buffer restored as zeros would change the first
// resumed update), within the regrouping tolerance at other K and stages.
EngineRun sgd_job(int world, int stage, double momentum) {
  EngineRun r = job(world, stage);
  r.options.optim.name = OptimizerKind::kSgd;
  r.options.optim.beta1 = momentum;  // [optim] beta1 is SGD's momentum
  return r;
}

// Runs `run` for 2 steps saving step-2 under `root`; "" or the failures.
std::string save_step_2(EngineRun run, const std::string& root) {
  run.steps = 2;
  run.save_steps = {2};
  run.save_root = root;
  return run_engine(run).failures;
}

TEST(Checkpoint, SgdStoresOnlyItsMomentumAndResumes) {
  for (const double momentum : {0.9, 0.0}) {
    TempDir dir;
    EngineRun first = sgd_job(4, 2, momentum);
    first.save_root = dir.path();
    first.save_steps = {kSaveAt};
    const EngineRunResult full = run_engine(first);
    ASSERT_EQ(full.failures, "") << "momentum " << momentum;
    const StatusOr<VerifyReport> verified = verify_checkpoint(dir.path());
    ASSERT_TRUE(verified.ok()) << verified.status().to_string();

    StatusOr<safetensors::Reader> opt = safetensors::Reader::open(dir.path() + "/step-10/optimizer.safetensors");
    ASSERT_TRUE(opt.ok()) << opt.status().to_string();
    std::vector<std::string> names;
    for (const safetensors::TensorInfo& t : opt->header().tensors) names.push_back(t.name);
    std::vector<std::string> expected;
    if (momentum != 0.0) {
      for (int l = 0; l < testing::TinyMlp::kLayers; ++l) {
        for (const char* what : {"weight", "bias"}) {
          expected.push_back("fc" + std::to_string(l) + "." + what + kMomentumBufferSuffix);
        }
      }
    }
    EXPECT_EQ(names, expected) << "momentum " << momentum;

    struct Resume {
      int world;
      int stage;
    };
    for (const Resume r : {Resume{4, 2}, Resume{2, 1}, Resume{1, 3}, Resume{3, 0}}) {
      EngineRun resume = sgd_job(r.world, r.stage, momentum);
      resume.load_from = dir.path();
      const EngineRunResult resumed = run_engine(resume);
      ASSERT_EQ(resumed.failures, "") << r.world << " ranks, stage " << r.stage << ", momentum " << momentum;
      ASSERT_EQ(resumed.stats.size(), static_cast<size_t>(kSteps - kSaveAt));
      const auto d = max_difference(resumed, full);
      std::printf("sgd momentum %.1f resumed at %d ranks, stage %d: max |difference| %.3g\n", momentum, r.world,
                  r.stage, d.value);
      if (r.world == 4 && r.stage == 2) {
        EXPECT_EQ(d.value, 0.0) << "same K and stage must continue bit for bit: " << d.where;
      } else {
        EXPECT_LE(d.value, kTol) << r.world << " ranks, stage " << r.stage << ": " << d.where;
      }
    }
  }
}

// fp16: the dynamic loss scale and its count of finite steps resume too. The initial
// scale overflows the fp16 gradients, so the first steps are skipped while it backs off,
// and with growth_interval 3 it keeps moving; a scale restarted at its initial value (or
// a lost count) skips other steps and changes every later update.
TEST(Checkpoint, Fp16LossScaleResumes) {
  TempDir dir;
  EngineRun first = job(2, 2);
  first.options.compute_dtype = DType::kF16;
  first.options.loss_scale.initial = 0x1p18;
  first.options.loss_scale.growth_interval = 3;
  first.steps = 12;
  first.save_root = dir.path();
  first.save_steps = {6};
  const EngineRunResult full = run_engine(first);
  ASSERT_EQ(full.failures, "");
  ASSERT_TRUE(full.stats[0].skipped);
  const CheckpointState saved = read_checkpoint_info(dir.path()).value().state;
  EXPECT_EQ(saved.compute_dtype, "fp16");
  EXPECT_EQ(saved.loss_scale, full.stats[5].loss_scale);
  std::printf("fp16: loss scale %g and %lld optimizer steps after 6 steps\n", saved.loss_scale,
              static_cast<long long>(saved.optimizer_steps));
  EXPECT_LT(saved.optimizer_steps, 6);  // skipped steps are not optimizer steps
  EXPECT_GT(saved.optimizer_steps, 1);

  EngineRun resume = first;
  resume.save_steps = {};
  resume.load_from = dir.path();
  const EngineRunResult resumed = run_engine(resume);
  ASSERT_EQ(resumed.failures, "");
  ASSERT_EQ(resumed.stats.size(), 6u);
  for (size_t s = 0; s < resumed.stats.size(); ++s) {
    EXPECT_EQ(resumed.stats[s].loss_scale, full.stats[6 + s].loss_scale) << "step " << 6 + s;
    EXPECT_EQ(resumed.stats[s].skipped, full.stats[6 + s].skipped) << "step " << 6 + s;
  }
  EXPECT_EQ(max_difference(resumed, full).value, 0.0);
}

TEST(Checkpoint, PerNodeCopiesEqualTheSharedOne) {
  TempDir shared, local;
  // AdamW at stage 2 saves in ResumesAtAnyWorldSizeAndStage; SGD (masters and momentum
  // only) gathers two tensors per bucket instead of three.
  struct Case {
    int stage;
    bool sgd;
  };
  for (const Case c : {Case{3, false}, Case{0, false}, Case{2, true}}) {
    const int stage = c.stage;
    EngineRun one = c.sgd ? sgd_job(4, stage, 0.9) : job(4, stage);
    one.steps = 3;
    one.save_steps = {3};
    one.save_root = shared.path() + "/stage" + std::to_string(stage);
    ASSERT_EQ(run_engine(one).failures, "");
    EngineRun per_node = one;
    per_node.save_root = local.path() + "/stage" + std::to_string(stage);
    per_node.save.storage = CheckpointStorage::kPerNode;
    per_node.local_world = 2;  // 2 "nodes" of 2 ranks, each with its own directory
    ASSERT_EQ(run_engine(per_node).failures, "");
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string want = file_bytes(one.save_root + "/step-3/" + file);
      ASSERT_FALSE(want.empty());
      for (int node : {0, 1}) {
        const std::string copy = per_node.save_root + "/node-" + std::to_string(node) + "/step-3/" + file;
        EXPECT_TRUE(file_bytes(copy) == want) << "stage " << stage << ": " << copy;
      }
    }
    StatusOr<CheckpointInfo> info = read_checkpoint_info(per_node.save_root + "/node-1");
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->state.storage, "per-node");
    // One node's copy alone resumes another topology.
    EngineRun resume = c.sgd ? sgd_job(2, 3, 0.9) : job(2, 3);
    resume.steps = 4;
    resume.load_from = per_node.save_root + "/node-1";
    EXPECT_EQ(run_engine(resume).failures, "");
  }
}

// What each rank's load_checkpoint returned, brought back through files.
std::vector<std::string> load_messages(
    int world, const std::string& path,
    const std::function<StatusOr<testing::TinyMlp>(Engine&)>& model = [](Engine& e) {
      return testing::TinyMlp::create(e);
    },
    const EngineOptions& engine_options = options(2), const LoadOptions& load = {}) {
  TempDir out;
  const std::string failures =
      testing::describe_failures(testing::fork_ranks(world, [&](int rank, int K, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, K, store));
        Engine engine(ctx, engine_options);
        ZDP_RETURN_IF_ERROR(model(engine).status());
        ZDP_RETURN_IF_ERROR(engine.finalize());
        StatusOr<CheckpointState> loaded = engine.load_checkpoint(path, load);
        std::ofstream(out.path() + "/" + std::to_string(rank)) << (loaded.ok() ? "loaded" : loaded.status().message());
        return Status::Ok();
      }));
  EXPECT_EQ(failures, "");
  std::vector<std::string> messages;
  for (int r = 0; r < world; ++r) messages.push_back(file_bytes(out.path() + "/" + std::to_string(r)));
  return messages;
}

// A checkpoint of another optimizer's state is refused, naming both, unless only the
// weights are loaded.
TEST(Checkpoint, AnotherOptimizersStateIsRefusedUnlessWeightsOnly) {
  TempDir dir;
  const std::string adamw = dir.path() + "/adamw", sgd = dir.path() + "/sgd", plain = dir.path() + "/plain";
  ASSERT_EQ(save_step_2(job(2, 2), adamw), "");
  ASSERT_EQ(save_step_2(sgd_job(2, 2, 0.9), sgd), "");
  ASSERT_EQ(save_step_2(sgd_job(2, 2, 0.0), plain), "");

  const std::string adamw_state = "adamw (exp_avg and exp_avg_sq per parameter)";
  const std::string momentum_state = "sgd with momentum (momentum_buffer per parameter)";
  const std::string plain_state = "sgd without momentum (no tensors)";
  struct Case {
    EngineOptions engine;
    std::string from, saved, configured;
  };
  const auto tiny = [](Engine& e) { return testing::TinyMlp::create(e); };
  for (const Case& c : {Case{sgd_job(2, 2, 0.9).options, adamw, adamw_state, momentum_state},
                        Case{sgd_job(2, 1, 0.0).options, adamw, adamw_state, plain_state},
                        Case{job(2, 2).options, sgd, momentum_state, adamw_state},
                        Case{sgd_job(2, 3, 0.0).options, sgd, momentum_state, plain_state},
                        Case{job(2, 0).options, plain, plain_state, adamw_state}}) {
    const std::vector<std::string> refused = load_messages(2, c.from, tiny, c.engine);
    std::printf("%s\n", refused[0].c_str());
    for (const std::string& m : refused) {
      EXPECT_THAT(m, HasSubstr(c.from + "/step-2/optimizer.safetensors holds the state of " + c.saved +
                               ", but the configured optimizer is " + c.configured +
                               ": configure the optimizer it was saved with, or load weights only"));
    }
    for (const std::string& m : load_messages(2, c.from, tiny, c.engine, LoadOptions{LoadScope::kWeightsOnly})) {
      EXPECT_EQ(m, "loaded") << c.from << " weights only";
    }
  }
}

TEST(Checkpoint, DamagedCheckpointsAreRefusedNamingWhatAndWhere) {
  TempDir dir;
  ASSERT_EQ(save_step_2(job(2, 2), dir.path() + "/good"), "");
  const std::string good = dir.path() + "/good/step-2";
  for (const std::string& m : load_messages(2, good)) EXPECT_EQ(m, "loaded");

  auto copy = [&](const std::string& name) {
    const std::string path = dir.path() + "/" + name;
    std::filesystem::copy(good, path, std::filesystem::copy_options::recursive);
    return path;
  };
  auto expect_all = [](const std::vector<std::string>& messages, const std::string& what) {
    for (size_t r = 0; r < messages.size(); ++r) EXPECT_THAT(messages[r], HasSubstr(what)) << "rank " << r;
  };

  // One flipped byte in chunk 1 of the masters (1 KiB chunks).
  const std::string flipped = copy("flipped");
  {
    std::fstream f(flipped + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(
        safetensors::Reader::open(flipped + "/model.safetensors").value().data_start() + 1500);
    f.seekg(at);
    const char c = static_cast<char>(f.get() ^ 0x10);
    f.seekp(at);
    f.put(c);
  }
  std::vector<std::string> messages = load_messages(2, flipped);
  expect_all(messages, flipped + "/model.safetensors: chunk 1 (data bytes [1024, 2048)) has checksum");
  for (int r = 0; r < 2; ++r) {
    std::printf("rank %d: %s\n", r, messages[static_cast<size_t>(r)].c_str());
    EXPECT_THAT(messages[static_cast<size_t>(r)], HasSubstr("rank " + std::to_string(r) + ": load_checkpoint from "));
  }
  const StatusOr<VerifyReport> verify = verify_checkpoint(flipped);
  ASSERT_FALSE(verify.ok());
  EXPECT_THAT(verify.status().message(), HasSubstr("chunk 1 (data bytes [1024, 2048))"));

  const std::string truncated = copy("truncated");
  std::filesystem::resize_file(truncated + "/optimizer.safetensors",
                               std::filesystem::file_size(truncated + "/optimizer.safetensors") - 100);
  expect_all(load_messages(2, truncated), truncated + "/optimizer.safetensors: truncated");

  const std::string missing = copy("missing");
  std::filesystem::remove(missing + "/optimizer.safetensors");
  expect_all(load_messages(2, missing), missing + "/optimizer.safetensors is missing");

  const std::string garbled = copy("garbled");
  std::ofstream(garbled + "/state.json") << "{\"format\": \"zdp-checkpoint\", \"format_version\": 1";
  expect_all(load_messages(2, garbled), garbled + "/state.json: not a JSON object");

  // Another model: fc1.weight is [24, 25] instead of [24, 24]. The refusal comes before
  // anything is loaded, so the engine stays usable.
  messages = load_messages(2, good, [](Engine& e) -> StatusOr<testing::TinyMlp> {
    for (int l = 0; l < testing::TinyMlp::kLayers; ++l) {
      const std::string name = "fc" + std::to_string(l);
      const int64_t in = testing::TinyMlp::kIn[l] + (l == 1 ? 1 : 0);
      ZDP_RETURN_IF_ERROR(e.add_param(name + ".weight", {testing::TinyMlp::kOut[l], in}, Init::zeros(), l).status());
      ZDP_RETURN_IF_ERROR(e.add_param(name + ".bias", {testing::TinyMlp::kOut[l]}, Init::zeros(), l).status());
    }
    return testing::TinyMlp();
  });
  expect_all(messages,
             "model.safetensors: tensor 'fc1.weight' is F32 [24, 24], but the model's parameter #2 "
             "'fc1.weight' is F32 [24, 25]: a checkpoint of another model");
}

TEST(Checkpoint, ARankKilledDuringASaveLeavesThePreviousCheckpoint) {
  EngineRun reference = job(2, 2);
  reference.steps = 4;
  const EngineRunResult uninterrupted = run_engine(reference);
  ASSERT_EQ(uninterrupted.failures, "");
  for (const char* fault : {"rank=1,at=write,step=4", "rank=0,at=commit,step=4", "rank=0,at=latest,step=4"}) {
    SCOPED_TRACE(fault);
    TempDir dir;
    EngineRun crash = job(2, 2);
    crash.steps = 4;
    crash.save_steps = {2, 4};
    crash.save_root = dir.path();
    crash.fault = fault;
    const EngineRunResult crashed = run_engine(crash);
    EXPECT_THAT(crashed.failures, HasSubstr("exit 86"));
    StatusOr<std::string> latest = find_latest_checkpoint(dir.path());
    ASSERT_TRUE(latest.ok()) << latest.status().to_string();
    EXPECT_EQ(*latest, dir.path() + "/step-2");
    EXPECT_EQ(std::filesystem::exists(dir.path() + "/step-4.tmp"),
              std::string(fault).find("latest") == std::string::npos);

    // Resume from the root (step 2), redo steps 2-3 and save step 4 over what was left.
    EngineRun resume = job(2, 2);
    resume.steps = 4;
    resume.load_from = dir.path();
    resume.save_steps = {4};
    resume.save_root = dir.path();
    resume.save.keep = 1;
    const EngineRunResult resumed = run_engine(resume);
    ASSERT_EQ(resumed.failures, "");
    EXPECT_EQ(max_difference(resumed, uninterrupted).value, 0.0);
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/step-4.tmp"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/step-2"));  // keep = 1
    EXPECT_EQ(find_latest_checkpoint(dir.path()).value(), dir.path() + "/step-4");
    EXPECT_TRUE(verify_checkpoint(dir.path()).ok());
  }
}

// A rank with a step counter of its own would write another checkpoint's directory.
TEST(Checkpoint, RanksSavingDifferentStepsAreRefused) {
  TempDir dir, out;
  const std::string failures = testing::describe_failures(
      testing::fork_ranks(2, [&](int rank, int K, Store& store) -> Status {
        ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, K, store));
        Engine engine(ctx, options(2));
        ZDP_RETURN_IF_ERROR(testing::TinyMlp::create(engine).status());
        ZDP_RETURN_IF_ERROR(engine.finalize());
        CheckpointState state;
        state.step = 5 + rank;
        StatusOr<std::string> saved = engine.save_checkpoint(dir.path(), state);
        std::ofstream(out.path() + "/" + std::to_string(rank)) << (saved.ok() ? "saved" : saved.status().message());
        return Status::Ok();
      }));
  ASSERT_EQ(failures, "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(file_bytes(out.path() + "/" + std::to_string(r)),
                HasSubstr("the ranks called save_checkpoint with different arguments (this rank: step " +
                          std::to_string(5 + r)));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // refused before anything was written
}

TEST(Checkpoint, PerNodeStorageOnASharedDirectoryIsRefused) {
  TempDir dir;
  EngineRun run = job(2, 2);
  run.steps = 1;
  run.save_steps = {1};
  run.save_root = dir.path();  // local_world 1: two "nodes", one directory
  run.save.storage = CheckpointStorage::kPerNode;
  EXPECT_THAT(run_engine(run).failures, HasSubstr("exit 1"));
  EXPECT_FALSE(find_latest_checkpoint(dir.path()).ok());
}

}  // namespace
}  // namespace zdp
