// Checkpoints through dp-train, end to end on real rank processes (CPU, Gloo): a run saved
// at step 10 with K = 4 at stage 2 and resumed with K = 2 (stage 1) and K = 1 (stage 3)
// ends at step 20 where the uninterrupted K = 4 run ends; resumed at K = 4, stage 2 it
// ends there bit for bit. Wrong or damaged checkpoints are refused. Restarts through
// dp-launch are dp_launch_restart_test.cc.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/checkpoint_tensors.h"
#include "testing/engine_runs.h"
#include "trainer/data/token_file.h"
#include "trainer/loop/train_loop.h"
#include "zdp/checkpoint.h"
#include "zdp/context.h"
#include "zdp/safetensors.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;

// Tolerance between runs that differ in world size or stage: the same as
// engine_equivalence_test's (the gradient sums are grouped differently over ranks and
// micro-batches, ~1 ulp of the parameters after 20 steps; 2e-6 is ~10 ulps). What a
// broken resume does is orders larger: AdamW restarted with m = v = 0 moves every
// parameter by ~lr = 1e-2 in its first step, a data position reset to 0 or a schedule
// restarted at step 0 changes every update from step 11 on.
constexpr double kTol = 2e-6;

// An mlp on synthetic data, 20 steps, a checkpoint every 10, a cosine schedule with
// warm-up (so the restored step matters), deterministic reductions.
Config mlp_config() {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 2;
  c.model.d_model = 32;
  c.model.vocab_size = 10;
  c.train.global_batch = 16;
  c.train.micro_batch = 2;
  c.train.steps = 20;
  c.train.log_every = 1000;
  c.train.deterministic = true;
  c.optim.lr = 1e-2;
  c.optim.schedule = LrSchedule::kCosine;
  c.optim.warmup_steps = 3;
  c.optim.min_lr = 1e-3;
  c.zero.bucket_mb = 0.01;  // several buckets, parameters straddling them
  c.checkpoint.every_steps = 10;
  return c;
}

struct TrainRun {
  std::string failures;  // empty when every rank succeeded
  std::string error;     // rank 0's error message, if train() failed
  int64_t first_step = -1;
  std::string resumed_from;
  std::vector<double> losses;
  std::string console;  // what rank 0 printed
};

// train() on `world` forked ranks, `local_world` to a node, each rank's config edited by
// `per_rank` when given; rank 0 reports back through a file.
TrainRun run_train(const Config& shared_config, int world, int local_world = 0,
                   const std::function<void(int rank, Config& config)>& per_rank = nullptr) {
  const std::string path = (fs::temp_directory_path() / ("zdp_ckpt_resume_" + std::to_string(::getpid()))).string();
  fs::remove(path);
  TrainRun run;
  run.failures = testing::describe_failures(testing::fork_ranks(world, [&](int rank, int k, Store& store) -> Status {
    Config config = shared_config;
    if (per_rank) per_rank(rank, config);
    ZDP_ASSIGN_OR_RETURN(Context ctx, testing::make_test_context(rank, k, store, local_world > 0 ? local_world : k, config));
    TrainOptions quiet;
    quiet.out = std::fopen(rank == 0 ? (path + ".console").c_str() : "/dev/null", "w");
    StatusOr<TrainSummary> s = train(ctx, config, quiet);
    std::fclose(quiet.out);
    if (rank == 0) {
      std::ofstream out(path);
      out.precision(17);
      if (!s.ok()) {
        out << "error\n" << s.status().to_string() << "\n";
      } else {
        out << "ok\n" << s->first_step << "\n" << (s->resumed_from.empty() ? "-" : s->resumed_from) << "\n";
        for (double l : s->losses) out << l << "\n";
      }
    }
    return s.status();
  }));
  std::ifstream in(path);
  std::string word;
  std::getline(in, word);
  if (word == "error") {
    std::stringstream rest;
    rest << in.rdbuf();
    run.error = rest.str();
  } else if (word == "ok") {
    in >> run.first_step >> run.resumed_from;
    for (double l; in >> l;) run.losses.push_back(l);
  }
  fs::remove(path);
  std::ifstream console(path + ".console");
  run.console.assign(std::istreambuf_iterator<char>(console), std::istreambuf_iterator<char>());
  fs::remove(path + ".console");
  return run;
}

using testing::bitwise_equal;
using testing::max_difference;
using testing::read_tensors;
using testing::Tensors;

class CheckpointResume : public ::testing::Test {
 protected:
  // The uninterrupted K = 4, stage 2 run, shared by the tests.
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("zdp_ckpt_resume_dir_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    Config c = mlp_config();
    c.zero.stage = 2;
    c.checkpoint.dir = (*dir_ / "full").string();
    full_ = new TrainRun(run_train(c, 4));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete full_;
  }
  static std::string full(const std::string& step) { return (*dir_ / "full" / step).string(); }
  static fs::path* dir_;
  static TrainRun* full_;
};

fs::path* CheckpointResume::dir_ = nullptr;
TrainRun* CheckpointResume::full_ = nullptr;

TEST_F(CheckpointResume, ContinuesAtOtherWorldSizesAndStagesAndBitForBitAtTheSame) {
  ASSERT_EQ(full_->failures, "");
  ASSERT_EQ(full_->losses.size(), 20u);
  EXPECT_EQ(full_->first_step, 0);
  const Tensors at10 = read_tensors(full("step-10/model.safetensors"));
  const Tensors at20 = read_tensors(full("step-20/model.safetensors"));
  const Tensors opt20 = read_tensors(full("step-20/optimizer.safetensors"));
  EXPECT_GT(max_difference(at10, at20), 100 * kTol) << "steps 11-20 must train, or equality proves nothing";

  struct Case {
    int world, stage;
    bool exact;
  };
  for (const Case& k : {Case{4, 2, true}, Case{2, 1, false}, Case{1, 3, false}}) {
    SCOPED_TRACE("resumed with K = " + std::to_string(k.world) + ", stage " + std::to_string(k.stage));
    Config c = mlp_config();
    c.zero.stage = k.stage;
    c.checkpoint.dir = (*dir_ / ("k" + std::to_string(k.world))).string();
    // K = 2 saves in per-node mode (one node here: it writes the full copy the shared
    // mode would): the same files, through the other write path.
    if (k.world == 2) c.checkpoint.storage = CheckpointStorage::kPerNode;
    c.checkpoint.resume = ResumeMode::kPath;
    c.checkpoint.resume_path = full("step-10");
    const TrainRun r = run_train(c, k.world);
    ASSERT_EQ(r.failures, "") << r.error;
    EXPECT_EQ(r.first_step, 10);
    EXPECT_EQ(r.resumed_from, full("step-10"));
    ASSERT_EQ(r.losses.size(), 10u);
    const std::string end = (fs::path(c.checkpoint.dir) / "step-20").string();
    const StatusOr<VerifyReport> verified = verify_checkpoint(end);
    EXPECT_TRUE(verified.ok()) << verified.status().to_string();
    const Tensors model = read_tensors(end + "/model.safetensors");
    const Tensors opt = read_tensors(end + "/optimizer.safetensors");
    if (k.exact) {
      EXPECT_TRUE(bitwise_equal(model, at20)) << "largest difference " << max_difference(model, at20);
      EXPECT_TRUE(bitwise_equal(opt, opt20)) << "largest difference " << max_difference(opt, opt20);
      for (size_t i = 0; i < 10; ++i) EXPECT_EQ(r.losses[i], full_->losses[10 + i]) << "step " << 11 + i;
    } else {
      const double d = max_difference(model, at20);
      std::printf("K=%d stage %d resumed from K=4 stage 2: largest parameter difference at step 20: %.3g\n",
                  k.world, k.stage, d);
      EXPECT_LE(d, kTol);
      for (size_t i = 0; i < 10; ++i) {
        EXPECT_NEAR(r.losses[i], full_->losses[10 + i], 1e-4 * full_->losses[10 + i]) << "step " << 11 + i;
      }
    }
  }
}

TEST_F(CheckpointResume, AutoFindsTheLatestAndStopsWhenTrainStepsIsReached) {
  ASSERT_EQ(full_->failures, "");
  Config c = mlp_config();
  c.checkpoint.dir = (*dir_ / "full").string();  // resume = "auto": step-20
  const TrainRun done = run_train(c, 2);
  ASSERT_EQ(done.failures, "") << done.error;
  EXPECT_EQ(done.first_step, 20);
  EXPECT_EQ(done.resumed_from, full("step-20"));
  EXPECT_TRUE(done.losses.empty());
  c.checkpoint.resume = ResumeMode::kNever;  // the same directory, from scratch
  c.train.steps = 4;
  const TrainRun fresh = run_train(c, 2);
  ASSERT_EQ(fresh.failures, "") << fresh.error;
  EXPECT_EQ(fresh.first_step, 0);
  EXPECT_EQ(fresh.losses.size(), 4u);
  // Starting over among the earlier run's checkpoints is said before a save replaces one.
  EXPECT_NE(fresh.console.find("checkpoint.resume = \"never\" starts this run over in " + (*dir_ / "full").string() +
                               ", which holds an earlier run's checkpoints (the newest step-20)"),
            std::string::npos)
      << fresh.console;
  EXPECT_NEAR(fresh.losses[0], full_->losses[0], 1e-6 * full_->losses[0]);  // K = 2 vs 4: summation order
}

TEST_F(CheckpointResume, RefusesAnotherModelADamagedFileAndAMissingPathNamingThem) {
  ASSERT_EQ(full_->failures, "");
  Config c = mlp_config();
  c.checkpoint.every_steps = 0;  // and no dir: these runs save nothing
  c.checkpoint.resume = ResumeMode::kPath;
  c.checkpoint.resume_path = full("step-10");
  c.model.d_model = 48;
  const TrainRun other = run_train(c, 1);
  EXPECT_NE(other.failures, "");
  EXPECT_NE(other.error.find("step-10"), std::string::npos) << other.error;
  EXPECT_NE(other.error.find("[48"), std::string::npos) << "names the shape that differs: " << other.error;

  const fs::path copy = *dir_ / "damaged" / "step-10";
  fs::create_directories(copy.parent_path());
  fs::copy(full("step-10"), copy);
  {
    std::fstream f(copy / "optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  c.model.d_model = 32;
  c.checkpoint.resume_path = copy.string();
  const TrainRun damaged = run_train(c, 2);
  EXPECT_NE(damaged.failures, "");
  EXPECT_NE(damaged.error.find("optimizer.safetensors"), std::string::npos) << damaged.error;

  c.checkpoint.resume_path = (*dir_ / "missing").string();
  const TrainRun missing = run_train(c, 1);
  EXPECT_NE(missing.failures, "");
  EXPECT_NE(missing.error.find("checkpoint.resume = \"" + c.checkpoint.resume_path + "\""), std::string::npos)
      << missing.error;
}

// Per-node storage, two "nodes" of two ranks whose node-local disks are two directories:
// node 1 crashed during the save of step 20 (its step-20 never committed, so it has only
// step-10) while node 0 committed it. resume = "auto" must take step 10, which every node
// has, and end bit for bit where the uninterrupted run ends.
TEST_F(CheckpointResume, PerNodeStorageResumesFromTheStepEveryNodeHas) {
  ASSERT_EQ(full_->failures, "");
  Config c = mlp_config();
  c.zero.stage = 2;
  c.checkpoint.storage = CheckpointStorage::kPerNode;
  auto node_dir = [&](int rank, Config& config) {
    config.checkpoint.dir = (*dir_ / ("node" + std::to_string(rank / 2))).string();
  };
  const TrainRun first = run_train(c, 4, 2, node_dir);
  ASSERT_EQ(first.failures, "") << first.error;
  EXPECT_TRUE(bitwise_equal(read_tensors((*dir_ / "node1/step-20/model.safetensors").string()),
                            read_tensors(full("step-20/model.safetensors"))));
  fs::remove_all(*dir_ / "node1" / "step-20");
  fs::remove(*dir_ / "node1" / "latest");
  const TrainRun resumed = run_train(c, 4, 2, node_dir);
  ASSERT_EQ(resumed.failures, "") << resumed.error;
  EXPECT_EQ(resumed.first_step, 10);
  EXPECT_EQ(resumed.resumed_from, (*dir_ / "node0" / "step-10").string());
  for (const char* node : {"node0", "node1"}) {
    const Tensors end = read_tensors((*dir_ / node / "step-20/model.safetensors").string());
    EXPECT_TRUE(bitwise_equal(end, read_tensors(full("step-20/model.safetensors")))) << node;
  }
  // A node without any checkpoint while another has some: refused, naming both.
  fs::remove_all(*dir_ / "node1");
  const TrainRun lacking = run_train(c, 4, 2, node_dir);
  EXPECT_NE(lacking.failures, "");
  EXPECT_NE(lacking.error.find("node(s) 1 have no checkpoint"), std::string::npos) << lacking.error;
}

// Per-node storage with keep_last = 1: node 1's creator dies while committing step 20.
// Each node pruned on its own before every node had committed, so node 0 kept only step
// 20 and node 1 only step 10, and no resume could work; pruning now waits for every
// node's commit, and the job resumes from step 10 on both.
TEST_F(CheckpointResume, PerNodeKeepOneSurvivesANodeThatFailedItsCommit) {
  ASSERT_EQ(full_->failures, "");
  Config c = mlp_config();
  c.zero.stage = 2;
  c.checkpoint.storage = CheckpointStorage::kPerNode;
  c.checkpoint.keep_last = 1;
  auto node_dir = [&](int rank, Config& config) {
    config.checkpoint.dir = (*dir_ / ("keep1-node" + std::to_string(rank / 2))).string();
  };
  const TrainRun crashed = run_train(c, 4, 2, [&](int rank, Config& config) {
    node_dir(rank, config);
    if (rank == 2) ::setenv("ZDP_CKPT_FAULT", "rank=2,at=commit,step=20", 1);  // in its own process
  });
  EXPECT_NE(crashed.failures, "");
  EXPECT_TRUE(fs::exists(*dir_ / "keep1-node0" / "step-10" / "state.json")) << "pruned before node 1 committed";
  EXPECT_TRUE(fs::exists(*dir_ / "keep1-node1" / "step-10" / "state.json"));
  EXPECT_FALSE(fs::exists(*dir_ / "keep1-node1" / "step-20"));
  const TrainRun resumed = run_train(c, 4, 2, node_dir);
  ASSERT_EQ(resumed.failures, "") << resumed.error;
  EXPECT_EQ(resumed.first_step, 10);
  for (const char* node : {"keep1-node0", "keep1-node1"}) {
    const Tensors end = read_tensors((*dir_ / node / "step-20/model.safetensors").string());
    EXPECT_TRUE(bitwise_equal(end, read_tensors(full("step-20/model.safetensors")))) << node;
    EXPECT_FALSE(fs::exists(*dir_ / node / "step-10")) << "keep_last = 1 once every node has step 20";
  }
}

// Every rank must read the same data: a node whose glob matched other shards (here rank
// 1's synthetic set is smaller) is refused at the start, naming both sizes, instead of
// training on another dataset without a word.
TEST_F(CheckpointResume, RanksThatSeeDifferentDataAreRefusedAtTheStart) {
  Config c = mlp_config();
  c.checkpoint.every_steps = 0;
  const TrainRun run = run_train(c, 2, 0, [](int rank, Config& config) {
    if (rank == 1) config.data.synthetic_samples = 900;
  });
  // Rank 1 stops with the message (DataAgreement tests its text); rank 0 with its peer gone.
  EXPECT_NE(run.failures.find("rank 1"), std::string::npos) << run.failures;
  EXPECT_EQ(run.first_step, -1) << "trained on different data";
}

// Token files of the same length but other contents (a node's stale copy of a shard)
// are refused as well: the start-up check compares a sampled digest, not only the sizes.
TEST_F(CheckpointResume, RanksWhoseTokenFilesDifferOnlyInContentsAreRefusedAtTheStart) {
  const fs::path dir = fs::temp_directory_path() / ("zdp_ckpt_same_data_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<uint16_t> tokens(4096);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 7 % 64);
  ASSERT_TRUE(write_token_file((dir / "node0.bin").string(), tokens).ok());
  tokens[0] ^= 1;  // the first token: always in the sampled windows
  ASSERT_TRUE(write_token_file((dir / "node1.bin").string(), tokens).ok());
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 1;
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.vocab_size = 64;
  c.model.seq_len = 8;
  c.data.kind = DataKind::kTokens;
  c.train.global_batch = 4;
  c.train.micro_batch = 2;
  c.train.steps = 2;
  c.train.log_every = 1000;
  ::testing::internal::CaptureStderr();  // the ranks' logs: fork_ranks reports only exit codes
  const TrainRun run = run_train(c, 2, 0, [&](int rank, Config& config) {
    config.data.path = (dir / ("node" + std::to_string(rank) + ".bin")).string();
  });
  const std::string logs = ::testing::internal::GetCapturedStderr();
  fs::remove_all(dir);
  EXPECT_NE(run.failures.find("rank 1: exit 1"), std::string::npos) << run.failures;
  EXPECT_NE(logs.find("rank 1's training data has as many samples as rank 0's (511) but other contents"),
            std::string::npos) << logs;
  EXPECT_EQ(run.first_step, -1) << "trained on different data";
}

}  // namespace
}  // namespace zdp::trainer
