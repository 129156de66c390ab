// What `dp-launch scale` reads of a run's train_summary.json (planner/run_summary_file.h):
// the summary dp-train writes is read back field for field, and a mistyped or
// out-of-range field is refused naming the file and the key, where the old reader
// converted a float such as 1e20 to an int (undefined; tests/fuzz/run_summary_fuzz.cc).
#include "planner/run_summary_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "planner/scale_report.h"
#include "trainer/loop/run_summary.h"

namespace zdp::launcher {
namespace {

// The summary of a two-rank run, as dp-train writes it.
std::string written_summary() {
  Config config;
  config.zero.stage = 2;
  config.train.global_batch = 8;
  config.train.micro_batch = 4;
  trainer::TrainSummary run;
  run.tokens_per_sample = 16;
  run.losses = {2.0, 1.5, 1.25, 1.0, 0.75};
  run.step_seconds = {0.9, 0.8, 0.25, 0.25, 0.3};
  return trainer::run_summary(config, 2, "cpu", run).dump();
}

std::string error(const std::string& text) {
  const StatusOr<ScalePoint> p = parse_run_summary(text, "logs/train_summary.json");
  return p.ok() ? std::string("ok") : p.status().message();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(RunSummaryFile, ReadsWhatDpTrainWrites) {
  const StatusOr<ScalePoint> p = parse_run_summary(written_summary(), "logs/train_summary.json");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->world_size, 2);
  EXPECT_EQ(p->stage, 2);
  EXPECT_EQ(p->global_batch, 8);
  EXPECT_EQ(p->steps, 5);
  EXPECT_DOUBLE_EQ(p->step_time_s, 0.25);          // the median of the timed steps (all but two)
  EXPECT_DOUBLE_EQ(p->samples_per_s, 8 / 0.25);
  EXPECT_DOUBLE_EQ(p->tokens_per_s, 8 * 16 / 0.25);
  EXPECT_DOUBLE_EQ(p->final_loss, 0.75);
  EXPECT_EQ(p->summary_path, "logs/train_summary.json");
}

TEST(RunSummaryFile, RefusesMistypedAndOutOfRangeFields) {
  const std::string good = written_summary();
  const auto refused = [&](const std::string& from, const std::string& to, const std::string& says) {
    const std::string message = error(replaced(good, from, to));
    EXPECT_NE(message.find("run summary logs/train_summary.json is malformed: " + says), std::string::npos)
        << from << " -> " << to << ": " << message;
  };
  EXPECT_NE(error("[1, 2").find("run summary logs/train_summary.json is malformed: not a JSON object"), std::string::npos);
  refused("\"world_size\":2", "\"world_size\":1e20", "world_size is not an integer");
  refused("\"world_size\":2", "\"world_size\":0", "world_size = 0 is outside [1, 16777216]");
  refused("\"world_size\":2", "\"world_sizes\":2", "world_size is missing");
  refused("\"stage\":2", "\"stage\":4", "stage = 4 is outside [0, 3]");
  refused("\"global_batch\":8", "\"global_batch\":18446744073709551615",
          "global_batch = 18446744073709551615 is outside [1, 9223372036854775807]");
  refused("\"tokens_per_s\":512.0", "\"tokens_per_s\":\"fast\"", "tokens_per_s is not a number");
  refused("\"step_time_s_median\":", "\"step_time_s_median\":-1,\"was\":", "step_time_s_median = -1 is below 0");
  refused("\"final_loss\":0.75", "\"final_loss\":\"low\"", "final_loss is missing or not a finite number or null");
  EXPECT_EQ(error(replaced(good, "\"final_loss\":0.75", "\"final_loss\":null")), "ok");  // a run of no steps
}

// A run whose loss went to NaN wrote null (JSON has no NaN): it was reported as 0.0000,
// the best loss there is; now as "not finite" (and a run of no steps as "-").
TEST(RunSummaryFile, ALossThatWasNotFiniteIsNotReportedAsZero) {
  StatusOr<ScalePoint> p = parse_run_summary(replaced(written_summary(), "\"final_loss\":0.75", "\"final_loss\":null"),
                                             "logs/train_summary.json");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(std::isnan(p->final_loss));
  StatusOr<ScaleReport> report = make_scale_report({*p});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_NE(format_scale(*report, "scale").find("not finite"), std::string::npos) << format_scale(*report, "scale");
  p->steps = 0;
  report = make_scale_report({*p});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(format_scale(*report, "scale").find("not finite"), std::string::npos) << format_scale(*report, "scale");
}

TEST(RunSummaryFile, AMissingFileSaysTheRunMayNotHaveFinished) {
  const StatusOr<ScalePoint> p = read_run_summary("/nonexistent-zdp-dir/train_summary.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("did dp-train finish?"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace zdp::launcher
