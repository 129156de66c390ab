// train_summary.json's numbers (trainer/loop/run_summary.h): warm-up exclusion, the median,
// the rates from it, nulls when there is nothing to report, and the file write.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "trainer/loop/run_summary.h"

namespace zdp::trainer {
namespace {

TEST(RunSummary, TimedStepsDropTheWarmUpOnlyWhenStepsRemain) {
  EXPECT_EQ(timed_steps({9, 8, 1, 2, 3}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(timed_steps({9, 8, 1}), (std::vector<double>{1}));
  EXPECT_EQ(timed_steps({9, 8}), (std::vector<double>{9, 8}));  // too few: all of them
  EXPECT_EQ(timed_steps({}), (std::vector<double>{}));
}

TEST(RunSummary, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
  EXPECT_EQ(median({}), 0);
}

TEST(RunSummary, RatesComeFromTheMedianStepTimeAfterWarmUp) {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.zero.stage = 1;
  c.train.global_batch = 24;
  c.train.micro_batch = 4;
  TrainSummary run;
  run.losses = {5.0, 4.0, 3.5, 3.0, 2.75};
  run.step_seconds = {10.0, 5.0, 0.5, 0.25, 0.3};  // slow start-up steps do not count
  run.evals = {{3, 3.9}, {5, 3.1}};
  run.params = 1234;
  run.tokens_per_sample = 16;
  run.peak_lr = 0.01;
  run.seconds = 20;
  const nlohmann::json j = run_summary(c, 3, "cpu", run);
  EXPECT_EQ(j.at("world_size"), 3);
  EXPECT_EQ(j.at("stage"), 1);
  EXPECT_EQ(j.at("steps"), 5);
  EXPECT_EQ(j.at("accum_steps"), 2);  // 24 = 3 x 4 x 2
  EXPECT_EQ(j.at("tokens_per_step"), 24 * 16);
  EXPECT_EQ(j.at("timed_steps"), 3);
  EXPECT_DOUBLE_EQ(j.at("step_time_s_median").get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(j.at("tokens_per_s").get<double>(), 24 * 16 / 0.3);
  EXPECT_DOUBLE_EQ(j.at("samples_per_s").get<double>(), 24 / 0.3);
  EXPECT_EQ(j.at("final_loss"), 2.75);
  EXPECT_EQ(j.at("eval_loss"), 3.1);
  EXPECT_EQ(j.at("eval_step"), 5);
  EXPECT_EQ(j.at("params"), 1234);
  EXPECT_EQ(j.at("seconds"), 20);

  EXPECT_EQ(j.at("first_step"), 0);
  EXPECT_TRUE(j.at("resumed_from").is_null());

  run.evals.clear();
  run.first_step = 40;  // resumed: 5 steps taken from step 40 on
  run.resumed_from = "ckpt/step-40";
  const nlohmann::json none = run_summary(c, 3, "cpu", run);
  EXPECT_TRUE(none.at("eval_loss").is_null());
  EXPECT_TRUE(none.at("eval_step").is_null());
  EXPECT_EQ(none.at("steps"), 5);
  EXPECT_EQ(none.at("first_step"), 40);
  EXPECT_EQ(none.at("resumed_from"), "ckpt/step-40");
  // Skipped steps count from step 1: 45 steps in all, 42 updates.
  EXPECT_TRUE(none.at("skipped_steps").is_null());  // no step ran here
  run.optimizer_steps = 42;
  const nlohmann::json skipped = run_summary(c, 3, "cpu", run);
  EXPECT_EQ(skipped.at("optimizer_steps"), 42);
  EXPECT_EQ(skipped.at("skipped_steps"), 3);
}

TEST(RunSummary, WritesTheFileUnderLogDirAndNamesAPathItCannotWrite) {
  Config c;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("zdp_run_summary_" + std::to_string(::getpid())) / "logs";
  c.launch.log_dir = dir.string();
  const std::string path = run_summary_path(c);
  EXPECT_EQ(path, (dir / "train_summary.json").string());
  ASSERT_TRUE(write_run_summary(path, {{"steps", 7}}).ok());  // creates the directory
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in).at("steps"), 7);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir.parent_path());

  const Status bad = write_run_summary("/proc/zdp-no-such-dir/train_summary.json", {{"steps", 7}});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/proc/zdp-no-such-dir"), std::string::npos) << bad.to_string();
}

}  // namespace
}  // namespace zdp::trainer
