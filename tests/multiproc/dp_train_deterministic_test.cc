// Deterministic mode end to end: the real dp-launch + dp-train (Gloo over loopback) with
// train.deterministic = true, the mlp and a 2-block gpt in fp32, 5 steps of 8
// micro-batches. At K = 1, 2 and 4 ranks, stages 0-3, two bucket sizes that cut the
// parameters differently, overlap on and off and both accumulation modes, every run
// leaves the same bytes of model.safetensors and optimizer.safetensors, prints the same
// parameter SHA-256 (and writes it to train_summary.json), prints the same loss, grad
// norm and held-out loss lines, and logs the same per-step losses to the last bit. A
// resume at another K and stage continues with the same hashes. dp-launch gives each rank
// cores / K OpenBLAS threads, so K = 1 and K = 2 also differ in thread count on any
// machine with 2 or more cores. Without the mode the same runs differ (the control: the
// comparisons can fail). bf16 compute needs a GPU in dp-train: tests/gpu/
// deterministic_gpu_test.cc; the engine's bf16 on the CPU: deterministic_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/internal/sha256.h"
#include "testing/run_command.h"
#include "testing/free_port.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

using testing::CommandRun;

constexpr int kSteps = 5;

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "missing " + path;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.finish_hex();
}

// What one dp-launch run leaves behind.
struct Outcome {
  std::string model_sha, optimizer_sha;  // of the last checkpoint's files
  std::string printed_sha, summary_sha;  // the "parameter sha256" line, train_summary.json's
  std::vector<std::string> lines;        // rank 0's step and eval lines, timings cut off
  nlohmann::json losses;                 // train_summary.json's per-step losses (full precision)
  std::string output;
};

// Rank 0's "step N/M | loss X | lr Y | grad norm Z" (without the rates and times) and
// "eval step N | held-out loss X" lines.
std::vector<std::string> loss_lines(const std::string& output) {
  std::vector<std::string> out;
  const std::regex line(R"(\[rank 0\] (step \d+/\d+ \| loss [0-9.]+ \| lr \S+ \| grad norm [0-9.]+|eval step \d+ \| held-out loss [0-9.]+))");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

class DpTrainDeterministic : public ::testing::Test {
 protected:
  // One run of `config` (a file under configs/) on `ranks` ranks with `sets` overrides;
  // checkpoints under `ckpt` (the last step is saved), logs in a directory of its own.
  Outcome run(const std::string& config, int ranks, const std::vector<std::string>& sets, const std::string& ckpt,
              bool deterministic = true) {
    const std::string logs = dir_.path() + "/logs" + std::to_string(runs_++);
    std::string cmd = std::string(ZDP_DP_LAUNCH) + " " + ZDP_SOURCE_DIR + "/configs/" + config +
                      " --set launch.program=" + ZDP_DP_TRAIN + " --set launch.log_dir=" + logs +
                      " --set launch.master_port=" + std::to_string(testing::free_port()) +
                      " --set launch.nproc_per_node=" + std::to_string(ranks) + " --set checkpoint.dir=" + ckpt +
                      " --set checkpoint.every_steps=0 --set train.log_every=1 --set train.deterministic=" +
                      (deterministic ? "true" : "false");
    for (const std::string& s : sets) cmd += " --set " + s;
    const CommandRun r = testing::run_command(cmd);
    Outcome o;
    o.output = r.output;
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
    std::ifstream in(ckpt + "/latest");
    std::string latest;
    std::getline(in, latest);
    const std::string step = ckpt + "/" + (latest.empty() ? "step-" + std::to_string(kSteps) : latest);
    o.model_sha = file_sha256(step + "/model.safetensors");
    o.optimizer_sha = file_sha256(step + "/optimizer.safetensors");
    std::smatch m;
    if (std::regex_search(r.output, m, std::regex(R"(\[rank 0\] dp-train: parameter sha256 ([0-9a-f]{64}) )"))) {
      o.printed_sha = m[1];
    }
    o.lines = loss_lines(r.output);
    std::ifstream summary(logs + "/train_summary.json");
    if (summary) {
      const nlohmann::json j = nlohmann::json::parse(summary, nullptr, false);
      if (j.is_object()) {
        o.losses = j.value("losses", nlohmann::json());
        if (j.contains("param_sha256") && j["param_sha256"].is_string()) o.summary_sha = j["param_sha256"];
      }
    }
    EXPECT_TRUE(o.losses.is_array()) << "no losses in " << logs << "/train_summary.json\n" << r.output;
    return o;
  }
  Outcome run(const std::string& config, int ranks, const std::vector<std::string>& sets) {
    return run(config, ranks, sets, dir_.path() + "/ckpt" + std::to_string(runs_));
  }

  static void expect_identical(const Outcome& a, const Outcome& ref, const std::string& what) {
    EXPECT_EQ(a.model_sha, ref.model_sha) << what << ": model.safetensors differs";
    EXPECT_EQ(a.optimizer_sha, ref.optimizer_sha) << what << ": optimizer.safetensors differs";
    EXPECT_EQ(a.printed_sha, ref.printed_sha) << what << ": the printed parameter hash differs\n" << a.output;
    EXPECT_EQ(a.summary_sha, a.printed_sha) << what << ": train_summary.json's param_sha256";
    EXPECT_EQ(a.lines, ref.lines) << what << ": the printed loss lines differ\n" << a.output;
    EXPECT_EQ(a.losses, ref.losses) << what << ": the logged losses differ";
  }

  testing::TempDir dir_;
  int runs_ = 0;
};

// The mlp: 256 units (its GEMMs big enough for OpenBLAS to use its threads), global batch
// 64 = 8 micro-batches of 8, held-out loss on 64 samples at steps 0 and 5.
const std::vector<std::string> kMlp = {"model.d_model=256", "train.global_batch=64", "train.micro_batch=8",
                                       "train.steps=5", "train.eval_samples=64", "optim.grad_clip=0.05"};

TEST_F(DpTrainDeterministic, MlpIsBitIdenticalAtAnyWorldSizeStageBucketOverlapAndAccumulation) {
  const Outcome ref = run("mlp-cpu.toml", 1, [] {
    auto s = kMlp;
    s.push_back("zero.stage=0");
    return s;
  }());
  ASSERT_EQ(ref.printed_sha.size(), 64u) << ref.output;
  ASSERT_EQ(ref.lines.size(), 2u + kSteps) << ref.output;  // 5 steps, evaluations at 0 and 5
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  std::printf("cores %u: K = 1 runs %u OpenBLAS threads per rank, K = 2 runs %u (dp-launch's cores / K)\n",
              std::thread::hardware_concurrency(), std::thread::hardware_concurrency(),
              std::max(1u, std::thread::hardware_concurrency() / 2));
  struct Case {
    int ranks;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases = {
      {2, {"zero.stage=1"}},
      {4, {"zero.stage=3"}},
      {2, {"zero.stage=2", "zero.bucket_mb=0.05", "zero.accumulate=\"sharded\""}},  // ~13k-element buckets
      {4, {"zero.stage=0", "zero.overlap=false"}},
      {2, {"zero.stage=3", "zero.overlap=false", "zero.bucket_mb=0.05"}},
      {4, {"zero.stage=2", "zero.bucket_mb=4"}},  // the whole model in one bucket
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = kMlp;
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    std::string what = std::to_string(c.ranks) + " ranks";
    for (const std::string& s : c.sets) what += ", " + s;
    expect_identical(run("mlp-cpu.toml", c.ranks, sets), ref, what);
  }

  // Resumed at another K and stage: 2 ranks at stage 1 to step 3, then 4 ranks at stage 3.
  const std::string ckpt = dir_.path() + "/resume";
  std::vector<std::string> first = kMlp;
  first.insert(first.end(), {"zero.stage=1", "train.steps=3"});
  run("mlp-cpu.toml", 2, first, ckpt);
  std::vector<std::string> second = kMlp;
  second.insert(second.end(), {"zero.stage=3", "checkpoint.resume=\"auto\""});
  const Outcome resumed = run("mlp-cpu.toml", 4, second, ckpt);
  EXPECT_NE(resumed.output.find("resum"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.model_sha, ref.model_sha) << "resumed at 4 ranks, stage 3";
  EXPECT_EQ(resumed.optimizer_sha, ref.optimizer_sha) << "resumed at 4 ranks, stage 3";
  EXPECT_EQ(resumed.printed_sha, ref.printed_sha) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 2u) << resumed.output;  // steps 4 and 5
  EXPECT_EQ(resumed.losses[0], ref.losses[3]);
  EXPECT_EQ(resumed.losses[1], ref.losses[4]);

  // The control: without the mode, K = 1 and K = 2 leave other bits and print no hash.
  std::vector<std::string> off = kMlp;
  off.push_back("zero.stage=2");
  const Outcome one = run("mlp-cpu.toml", 1, off, dir_.path() + "/off1", false);
  const Outcome two = run("mlp-cpu.toml", 2, off, dir_.path() + "/off2", false);
  EXPECT_NE(one.model_sha, two.model_sha) << "without train.deterministic the runs should differ";
  EXPECT_NE(one.losses, two.losses) << "without train.deterministic the losses should differ";
  EXPECT_EQ(one.printed_sha, "") << one.output;
}

// A 2-block gpt (d_model 64, 4 heads, 32 tokens), global batch 16 = 8 micro-batches of 2;
// the held-out loss at step 5 on 3 micro-batches, which 2 and 4 ranks do not split evenly
// (at stage 3 a rank without one must still join the parameter gathers).
const std::vector<std::string> kGpt = {
    "data.kind=\"synthetic\"", "model.n_layers=2", "model.d_model=64", "model.seq_len=32",  "model.vocab_size=64",
    "train.global_batch=16",   "train.micro_batch=2", "train.steps=5",  "train.eval_samples=6",
    "train.eval_every=0",      "optim.warmup_steps=2"};

TEST_F(DpTrainDeterministic, TwoBlockGptIsBitIdenticalAtAnyWorldSizeAndStage) {
  const Outcome ref = run("quickstart.toml", 1, [] {
    auto s = kGpt;
    s.push_back("zero.stage=0");
    return s;
  }());
  ASSERT_EQ(ref.printed_sha.size(), 64u) << ref.output;
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  const std::vector<std::pair<int, std::vector<std::string>>> cases = {
      {2, {"zero.stage=2"}},
      {4, {"zero.stage=3", "zero.bucket_mb=0.02"}},  // 5k-element buckets: other cuts
      {2, {"zero.stage=1", "zero.overlap=false"}},
      {4, {"zero.stage=3", "zero.accumulate=\"sharded\""}},
  };
  for (const auto& [ranks, extra] : cases) {
    std::vector<std::string> sets = kGpt;
    sets.insert(sets.end(), extra.begin(), extra.end());
    std::string what = "gpt, " + std::to_string(ranks) + " ranks";
    for (const std::string& s : extra) what += ", " + s;
    expect_identical(run("quickstart.toml", ranks, sets), ref, what);
  }
  std::vector<std::string> off = kGpt;
  off.push_back("zero.stage=2");
  const Outcome one = run("quickstart.toml", 1, off, dir_.path() + "/off1", false);
  const Outcome two = run("quickstart.toml", 2, off, dir_.path() + "/off2", false);
  EXPECT_NE(one.model_sha, two.model_sha) << "without train.deterministic the runs should differ";
}

}  // namespace
}  // namespace zdp

namespace zdp {
namespace {

// README's "Deterministic mode" section prints what configs/mlp-cpu.toml with the mode
// ends with, at 1 and at 2 ranks: the step-60 line, the held-out loss and the parameter
// digest. This runs the config as it is (2 ranks, and checkpoints in a folder of the
// test's own) and compares with README's own lines, so that the digest cannot go stale
// unnoticed (it had, across 258 commits that touched the data path).
TEST_F(DpTrainDeterministic, ReadmesDigestIsWhatTheConfigPrints) {
  std::ifstream readme(std::string(ZDP_SOURCE_DIR) + "/README.md");
  const std::string text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(\[rank 0\] dp-train: parameter sha256 ([0-9a-f]{64}) )")))
      << "README.md lost its deterministic-mode digest line";
  const std::string documented = m[1];
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(\[rank 0\] (step 60/60 \| loss [0-9.]+ \| lr \S+ \| grad norm [0-9.]+) \|)")));
  const std::string step_line = m[1];
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(\[rank 0\] (eval step 60 \| held-out loss [0-9.]+) )")));
  const std::string eval_line = m[1];
  const Outcome o = run("mlp-cpu.toml", 2, {"checkpoint.resume=never"}, dir_.path() + "/readme-ckpt");
  EXPECT_EQ(o.printed_sha, documented) << "README.md's digest differs from what the run prints\n" << o.output;
  EXPECT_NE(std::find(o.lines.begin(), o.lines.end(), step_line), o.lines.end()) << step_line << "\n" << o.output;
  EXPECT_NE(std::find(o.lines.begin(), o.lines.end(), eval_line), o.lines.end()) << eval_line << "\n" << o.output;
}

}  // namespace
}  // namespace zdp
