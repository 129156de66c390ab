// train_summary.json counts the steps skipped for a non-finite gradient
// (trainer/loop/run_summary.h): the console says "skipped" only on the steps it logs, and
// the GPU check took a run that skipped most of its steps for a good one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

// dp-train alone (one rank, no launcher) on the mlp config for 20 steps, logging steps 1,
// 10 and 20; returns its train_summary.json.
nlohmann::json run_dp_train(const testing::TempDir& dir, const std::string& lr, std::string* output) {
  std::string cmd = "timeout 120 " + std::string(ZDP_DP_TRAIN) + " --config " + ZDP_SOURCE_DIR + "/configs/mlp-cpu.toml";
  for (const std::string& s : std::vector<std::string>{"train.steps=20", "train.log_every=10", "optim.warmup_steps=0", "optim.lr=" + lr,
                               "checkpoint.dir=\"\"", "checkpoint.every_steps=0", "launch.log_dir=" + dir.path()}) {
    cmd += " --set '" + s + "'";
  }
  const testing::CommandRun r = testing::run_command(cmd);
  *output = r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir.path() + "/train_summary.json");
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
}

TEST(DpTrainSkippedSteps, EveryStepSkippedIsCountedNotOnlyTheLoggedOnes) {
  testing::TempDir diverged;
  std::string output;
  // lr 1000 sends the weights to infinity within a few steps; every step after has a
  // non-finite gradient and is skipped.
  const nlohmann::json j = run_dp_train(diverged, "1000", &output);
  ASSERT_TRUE(j.contains("skipped_steps")) << output;
  const int64_t skipped = j.at("skipped_steps"), taken = j.at("optimizer_steps");
  EXPECT_EQ(skipped + taken, 20) << output;
  const std::regex skipped_line(R"(\| skipped)");
  const auto logged = std::distance(std::sregex_iterator(output.begin(), output.end(), skipped_line), std::sregex_iterator());
  EXPECT_GT(skipped, logged) << "the summary counts more skipped steps than the 3 logged lines show\n" << output;
  // The warnings name the update that was skipped (the optimizer's count, which a skip
  // does not advance: they used to call it "step N" for every trainer step after) and
  // how many in a row: the last one says all of them.
  const std::string last = "update " + std::to_string(taken + 1) + " skipped (" + std::to_string(skipped) +
                           (skipped == 1 ? " step" : " steps") + " in a row";
  EXPECT_NE(output.find(last), std::string::npos) << last << "\n" << output;

  testing::TempDir healthy;
  const nlohmann::json ok = run_dp_train(healthy, "0.01", &output);
  EXPECT_EQ(ok.value("skipped_steps", int64_t{-1}), 0) << output;
  EXPECT_EQ(ok.value("optimizer_steps", int64_t{-1}), 20) << output;
}

}  // namespace
}  // namespace zdp
