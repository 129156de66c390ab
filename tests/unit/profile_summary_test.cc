// The profile summary (profile/src/profile_summary.h) of two synthetic ranks: the
// straggler, the step's parts adding up, overlap, throughput, memory against the plan,
// the printed table and the JSON line.
#include "profile/src/profile_summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/src/profile_json.h"
#include "tests/unit/profile_timelines.h"

namespace zdp::profile {
namespace {

using timelines::two_ranks;

TEST(ProfileSummary, NamesTheSlowRankAndAddsUp) {
  SummaryInputs in;
  in.world_size = 2;
  in.samples_per_step = 38;
  in.tokens_per_sample = 10;
  in.flops_per_sample = 4.0;
  in.peak_flops = 1.0;
  in.planned.fill(-1);
  in.planned[static_cast<size_t>(MemCategory::kParams)] = 800;
  const StatusOr<Summary> s = summarize(two_ranks(/*rank1_backward_extra=*/4.0), in);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->steps, 3);
  EXPECT_EQ(s->slowest_rank, 1);
  EXPECT_DOUBLE_EQ(s->median_compute, 9.0);  // ranks: 9 and 13; the slowest is not its own reference
  EXPECT_NEAR(s->slowest_excess, 4.0 / 9.0, 1e-12);
  EXPECT_DOUBLE_EQ(s->step_seconds, 21.0);  // 19 and 23
  EXPECT_NEAR(s->named_seconds() + s->parts[static_cast<size_t>(StepPart::kOther)], s->step_seconds, 1e-9);
  EXPECT_NEAR(s->hidden_fraction, 1.0 - 4.1 / 7.2, 1e-9);  // exposed 4.1 of 7.2 per step
  EXPECT_DOUBLE_EQ(s->samples_per_second, 38.0 / 21.0);
  EXPECT_DOUBLE_EQ(s->tokens_per_second, 380.0 / 21.0);
  EXPECT_DOUBLE_EQ(s->mfu, 4.0 * (38.0 / 21.0) / 2.0);
  ASSERT_EQ(s->memory.size(), static_cast<size_t>(kNumMemCategories) + 1);
  EXPECT_EQ(s->memory[0].planned, 800);
  EXPECT_EQ(s->memory[0].measured, 1000);
  EXPECT_EQ(s->memory[static_cast<size_t>(MemCategory::kOther)].peak, 800);  // the larger rank's
  EXPECT_EQ(s->memory.back().planned, -1);  // not every category is planned
  EXPECT_EQ(s->memory.back().peak, 1800);
  // Per rank and step at K = 2: (4096 + 8192) / 2 reduce-scattered, 2 x 8192 / 2 gathered,
  // the norm's 16-byte all-reduce x 2 (K-1)/K = 16.
  EXPECT_DOUBLE_EQ(s->sent_grad_bytes_per_step, 6144.0);
  EXPECT_DOUBLE_EQ(s->sent_bytes_per_step, 6144.0 + 8192.0 + 16.0);
  const std::string table = format_summary(*s, {"t.json", "m.svg", "p.jsonl"});
  EXPECT_NE(table.find("slowest: rank 1, +44.4% vs the other ranks' median"), std::string::npos) << table;
  EXPECT_NE(table.find("+25.0%"), std::string::npos) << table;  // params: 1000 measured vs 800 planned
  EXPECT_NE(table.find("trace t.json"), std::string::npos) << table;
  const nlohmann::json line = summary_line(*s, {"t.json", "m.svg", "p.jsonl"});
  EXPECT_EQ(line["slowest_rank"], 1);
  EXPECT_EQ(line["type"], "summary");
}

TEST(ProfileSummary, NoMeasuredStepIsAnError) {
  std::vector<RankProfile> ranks(2);
  const StatusOr<Summary> s = summarize(ranks, SummaryInputs{});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no rank measured a step"), std::string::npos);
  // A run whose every step was warm-up (a resumed run with one step left) is told so, not
  // sent to look for trace marks it never wrote.
  SummaryInputs resumed;
  resumed.warmup_steps = 2;
  resumed.steps_run = 1;
  EXPECT_EQ(summarize(ranks, resumed).status().message(),
            "profile: no step measured: this run trained 1 step(s), all within profile.warmup_steps = 2 (a resumed "
            "run trains only the steps left to train.steps)");
}

// One rank exchanges nothing: its "waits" are the host's own work around the no-op
// collectives, and read as more exposed communication than there was communication.
TEST(ProfileSummary, OneRankHasNoExposedCommunication) {
  std::vector<RankProfile> ranks = two_ranks(0.0);
  ranks.resize(1);
  SummaryInputs in;
  in.world_size = 1;
  in.planned.fill(-1);
  const StatusOr<Summary> s = summarize(ranks, in);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->exposed_seconds, 0.0);
  EXPECT_LT(s->hidden_fraction, 0.0);
  EXPECT_EQ(step_line(ranks[0].steps[0], 0, 1, 0.0)["exposed_comm_ms"], 0.0);
  EXPECT_GT(step_line(ranks[0].steps[0], 0, 2, 0.0)["exposed_comm_ms"].get<double>(), 0.0);  // the same step at K = 2
  // The table: no collectives, no straggler verdict (there are no other ranks), and the
  // communication line says why (it said "none measured", then printed both).
  const std::string table = format_summary(*s, {"", "", ""});
  EXPECT_NE(table.find("communication: one rank: nothing exchanged"), std::string::npos) << table;
  EXPECT_EQ(table.find("collectives per bucket"), std::string::npos) << table;
  EXPECT_EQ(table.find("slowest:"), std::string::npos) << table;
  EXPECT_NE(table.find("stragglers: forward + backward per rank, ms per step:\n  rank 0"), std::string::npos) << table;
}

// Deterministic mode all-gathers the gradients (the reduction side) and, at stages 1-2,
// the parameters of the same bucket: two rows that both read "all-gather" before.
TEST(ProfileSummary, TheGradientAllGatherIsToldFromTheParameters) {
  std::vector<RankProfile> ranks = two_ranks(0.0);
  for (RankProfile& r : ranks) {
    for (StepProfile& s : r.steps) {
      s.collectives.push_back({0, CollectiveOp::kAllGather, 4096, 1.0, 2.0, /*reduction=*/true});
      s.collectives.push_back({0, CollectiveOp::kAllGather, 2048, 3.0, 4.0, /*reduction=*/false});
    }
  }
  SummaryInputs in;
  in.world_size = 2;
  in.planned.fill(-1);
  const StatusOr<Summary> s = summarize(ranks, in);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string table = format_summary(*s, OutputPaths{});
  EXPECT_NE(table.find("all-gather (grads)"), std::string::npos) << table;
  EXPECT_EQ(collective_label(CollectiveOp::kAllGather, false), "all-gather");
  EXPECT_EQ(collective_label(CollectiveOp::kReduceScatter, true), "reduce-scatter");
}

}  // namespace
}  // namespace zdp::profile
