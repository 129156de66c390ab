// Checkpoints on real rank processes (CPU, Gloo): a save at K = 4, stage 2 resumes at
// other world sizes and stages and continues like the uninterrupted run (bit for bit at
// the same K and stage), the file holds exactly the engine's masters, node-local copies
// equal the shared one, SGD stores and restores only its momentum, and fp16's loss scale
// resumes. Refused and interrupted checkpoints: engine_checkpoint_faults_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/checkpoint_jobs.h"
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
using testing::checkpoint_jobs::file_bytes;
using testing::checkpoint_jobs::job;
using testing::checkpoint_jobs::kSteps;
using testing::checkpoint_jobs::options;
using testing::checkpoint_jobs::save_step_2;
using testing::checkpoint_jobs::sgd_job;

// Runs that differ only in how gradient sums are grouped (other K) agree to about an
// ulp of the parameters (derived in testing/engine_comparisons.h).
constexpr double kTol = testing::kRegroupingTol;
constexpr int kSaveAt = 10;

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

// Per-node copies of one step from two runs (a node's disk that still held another run's
// step-3, or a copy taken from the wrong run): the load compared only the step, and the
// job trained a mix of the two without a word. The copies' checksums are compared too.
TEST(Checkpoint, PerNodeCopiesOfDifferentRunsAreRefused) {
  TempDir root;
  EngineRun a = job(4, 2);
  a.steps = 3;
  a.save_steps = {3};
  a.save.storage = CheckpointStorage::kPerNode;
  a.local_world = 2;
  a.save_root = root.path() + "/a";
  ASSERT_EQ(run_engine(a).failures, "");
  EngineRun b = a;
  b.options.seed = 99;  // another run
  b.save_root = root.path() + "/b";
  ASSERT_EQ(run_engine(b).failures, "");
  std::filesystem::remove_all(root.path() + "/a/node-1");
  std::filesystem::copy(root.path() + "/b/node-1", root.path() + "/a/node-1", std::filesystem::copy_options::recursive);
  EngineRun resume = a;
  resume.steps = 4;
  resume.save_steps = {};
  resume.load_from = root.path() + "/a";
  resume.load_per_node = true;
  ::testing::internal::CaptureStderr();  // the ranks' messages (forked: they share fd 2)
  const std::string failures = run_engine(resume).failures;
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(failures, "");
  EXPECT_NE(said.find("load_checkpoint from " + root.path() + "/a/node-1: the ranks' copies of step 3 differ (their "
                      "checksums or state.json do; this rank read " + root.path() + "/a/node-1/step-3)"),
            std::string::npos)
      << said;
  // Node 1 given node 0's copy again: they are one checkpoint, and the job resumes.
  std::filesystem::remove_all(root.path() + "/a/node-1");
  std::filesystem::copy(root.path() + "/a/node-0", root.path() + "/a/node-1", std::filesystem::copy_options::recursive);
  EXPECT_EQ(run_engine(resume).failures, "");
}

}  // namespace
}  // namespace zdp
