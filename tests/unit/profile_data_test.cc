// The profiler's arithmetic on synthetic timelines: steps cut into parts that add up to
// the step, communication waits moved out of forward/backward, collectives paired with
// their bus bandwidth, the summary (straggler, overlap, throughput), the trace's lanes and
// the JSON round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "profile/src/chrome_trace.h"
#include "profile/src/memory_svg.h"
#include "profile/src/profile_data.h"
#include "profile/src/profile_json.h"
#include "profile/src/profile_summary.h"

namespace zdp::profile {
namespace {

using Kind = TimelineEvent::Kind;

TimelineEvent at(Kind kind, double t, int64_t step = 0) { return TimelineEvent{kind, -1, step, t}; }
TimelineEvent comm(Kind kind, double t, int bucket, CollectiveOp op, int64_t bytes, int64_t step = 0) {
  return TimelineEvent{kind, bucket, step, t, op, bytes};
}

// One step of two micro-batches with a gather wait inside the second forward, as an
// engine at stage 3 records it (times in seconds, offset by `t0`).
std::vector<TimelineEvent> one_step(double t0, int64_t step, double backward_extra = 0) {
  const double b = backward_extra;
  std::vector<TimelineEvent> e = {
      at(Kind::kIterationBegin, t0 + 0, step), at(Kind::kForward, t0 + 1, step), at(Kind::kBackward, t0 + 3, step),
      at(Kind::kMicroEnd, t0 + 6 + b, step),   at(Kind::kForward, t0 + 7 + b, step),
      comm(Kind::kCommWaitBegin, t0 + 8 + b, 0, CollectiveOp::kAllGather, 0, step),
      comm(Kind::kCommWaitEnd, t0 + 9 + b, 0, CollectiveOp::kAllGather, 0, step),
      at(Kind::kBackward, t0 + 10 + b, step),  at(Kind::kMicroEnd, t0 + 12 + b, step),
      at(Kind::kStepBegin, t0 + 12.5 + b, step), at(Kind::kReductionsDone, t0 + 14 + b, step),
      at(Kind::kNormDone, t0 + 15 + b, step),  at(Kind::kOptimizerDone, t0 + 17 + b, step),
      at(Kind::kStepEnd, t0 + 18 + b, step),   at(Kind::kIterationEnd, t0 + 19 + b, step),
  };
  // The comm lane, in stream order: bucket 1 reduced during the first backward, bucket 0
  // gathered for the second forward and reduced after the second backward, the norm's
  // all-reduce (bucket -1) inside step(), bucket 0 gathered after the optimizer.
  for (const TimelineEvent& c :
       {comm(Kind::kReduceStart, t0 + 4, 1, CollectiveOp::kReduceScatter, 4096, step),
        comm(Kind::kReduceEnd, t0 + 5, 1, CollectiveOp::kReduceScatter, 4096, step),
        comm(Kind::kGatherStart, t0 + 7.9 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kGatherEnd, t0 + 9 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kReduceStart, t0 + 11 + b, 0, CollectiveOp::kReduceScatter, 8192, step),
        comm(Kind::kReduceEnd, t0 + 13.5 + b, 0, CollectiveOp::kReduceScatter, 8192, step),
        comm(Kind::kReduceStart, t0 + 14.2 + b, -1, CollectiveOp::kAllReduce, 16, step),
        comm(Kind::kReduceEnd, t0 + 14.8 + b, -1, CollectiveOp::kAllReduce, 16, step),
        comm(Kind::kGatherStart, t0 + 16 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kGatherEnd, t0 + 18 + b, 0, CollectiveOp::kAllGather, 8192, step)}) {
    e.push_back(c);
  }
  return e;
}

TEST(ProfileSteps, PartsCoverTheStepAndWaitsLeaveForwardAndBackward) {
  const std::vector<StepProfile> steps = steps_from_timeline(one_step(100.0, 0));
  ASSERT_EQ(steps.size(), 1u);
  const StepProfile& s = steps[0];
  EXPECT_DOUBLE_EQ(s.seconds(), 19.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kData), 2.0);        // 0-1 and 6-7
  EXPECT_DOUBLE_EQ(s.part(StepPart::kForward), 4.0);     // 1-3, 7-8, 9-10
  EXPECT_DOUBLE_EQ(s.part(StepPart::kBackward), 5.0);    // 3-6, 10-12
  EXPECT_DOUBLE_EQ(s.part(StepPart::kOther), 0.5);       // 12-12.5: the micro-batch end -> step()
  EXPECT_DOUBLE_EQ(s.part(StepPart::kReduceWait), 1.5);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kNorm), 1.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kOptimizer), 2.0);
  EXPECT_DOUBLE_EQ(s.part(StepPart::kGatherWait), 2.0);  // 8-9 in forward, 17-18 in step()
  EXPECT_DOUBLE_EQ(s.part(StepPart::kPostStep), 1.0);
  double sum = 0;
  for (double p : s.parts) sum += p;
  EXPECT_DOUBLE_EQ(sum, s.seconds());
  EXPECT_DOUBLE_EQ(s.compute(), 9.0);
  ASSERT_EQ(s.collectives.size(), 5u);
  EXPECT_EQ(s.collectives[2].bucket, 0);
  EXPECT_EQ(s.collectives[2].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(s.collectives[2].bytes, 8192);
  EXPECT_DOUBLE_EQ(s.collectives[2].seconds(), 2.5);
  EXPECT_EQ(s.collectives[3].bucket, -1);
  EXPECT_NEAR(s.comm(), 1.0 + 1.1 + 2.5 + 0.6 + 2.0, 1e-9);
  EXPECT_NEAR(s.exposed_comm(), 1.5 + 2.0 + 0.6, 1e-9);  // the norm's all-reduce blocks
  // The spans tile the step in order.
  double cursor = s.begin;
  for (const Span& sp : s.spans) {
    EXPECT_GE(sp.begin, cursor - 1e-12);
    cursor = sp.end;
  }
}

TEST(ProfileSteps, IncompleteStepsAreLeftOutAndStepsComeInOrder) {
  std::vector<TimelineEvent> events = one_step(50.0, 4);
  const std::vector<TimelineEvent> earlier = one_step(0.0, 3);
  events.insert(events.end(), earlier.begin(), earlier.end());
  events.push_back(at(Kind::kIterationBegin, 80.0, 5));  // a step without its end
  const std::vector<StepProfile> steps = steps_from_timeline(events);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 3);
  EXPECT_EQ(steps[1].step, 4);
}

TEST(ProfileSteps, BusBandwidthFollowsNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveOp::kAllReduce, 1), 0.0);
  const CollectiveTiming c{0, CollectiveOp::kReduceScatter, 1 << 20, 1.0, 1.5};
  EXPECT_DOUBLE_EQ(c.busbw(4), (1 << 20) / 0.5 * 0.75);
}

std::vector<RankProfile> two_ranks(double rank1_backward_extra) {
  std::vector<RankProfile> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].host = "h";
    std::vector<TimelineEvent> events;
    for (int64_t step = 0; step < 3; ++step) {
      const std::vector<TimelineEvent> e = one_step(100.0 * static_cast<double>(step), step, r == 1 ? rank1_backward_extra : 0);
      events.insert(events.end(), e.begin(), e.end());
    }
    ranks[static_cast<size_t>(r)].steps = steps_from_timeline(events);
    for (StepProfile& s : ranks[static_cast<size_t>(r)].steps) {
      s.memory[static_cast<size_t>(MemCategory::kParams)] = {1000, 1000};
      s.memory[static_cast<size_t>(MemCategory::kOther)] = {500, 700 + 100 * r};
      s.memory_total = {1500, 1700 + 100 * r};
    }
  }
  return ranks;
}

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
  EXPECT_DOUBLE_EQ(s->median_compute, 11.0);  // ranks: 9 and 13
  EXPECT_NEAR(s->slowest_excess, 2.0 / 11.0, 1e-12);
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
  const std::string table = format_summary(*s, {"t.json", "m.svg", "p.jsonl"});
  EXPECT_NE(table.find("slowest: rank 1, +18.2% vs the median"), std::string::npos) << table;
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
}

TEST(ProfileTrace, OneComputeAndOneCommLanePerRankWithBucketEvents) {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace(two_ranks(0.0), 2));
  std::map<std::pair<int, int>, std::string> lanes;
  int steps = 0, buckets = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") lanes[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] == "X" && e["tid"] == kComputeTid && e["name"].get<std::string>().rfind("step ", 0) == 0) ++steps;
    if (e["ph"] == "X" && e["tid"] == kCommTid && e["args"]["bucket"].get<int>() >= 0) {
      ++buckets;
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      EXPECT_GT(e["args"]["busbw_gbps"].get<double>(), 0);
    }
  }
  EXPECT_EQ(lanes, (std::map<std::pair<int, int>, std::string>{
                       {{0, 0}, "compute"}, {{0, 1}, "comm"}, {{1, 0}, "compute"}, {{1, 1}, "comm"}}));
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(buckets, 24);  // 2 ranks x 3 steps x 4 bucket collectives
}

TEST(ProfileJson, RankProfilesSurviveTheStore) {
  const RankProfile p = two_ranks(1.0)[1];
  const StatusOr<RankProfile> q = rank_from_json(rank_to_json(p), "rank 1's profile");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  ASSERT_EQ(q->steps.size(), p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(q->steps[i].parts, p.steps[i].parts);
    EXPECT_EQ(q->steps[i].spans.size(), p.steps[i].spans.size());
    EXPECT_EQ(q->steps[i].collectives.size(), p.steps[i].collectives.size());
    EXPECT_EQ(q->steps[i].memory_total.peak_bytes, p.steps[i].memory_total.peak_bytes);
  }
  const StatusOr<RankProfile> bad = rank_from_json("{\"rank\": 1}", "rank 1's profile");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank 1's profile is not a profile"), std::string::npos);
}

TEST(ProfileSvg, OneGroupPerStageAndABarPerRank) {
  std::vector<StageBars> stages;
  for (int stage = 0; stage <= 3; ++stage) {
    StageBars g;
    g.stage = stage;
    g.caption = stage == 2 ? "this run: measured" : "planned";
    if (stage == 2) g.bars.push_back(MemoryBar{"rank 0", {1 << 20, 1 << 20, 0, 0, 0, 0}, true});
    g.bars.push_back(MemoryBar{"plan", {1 << 20, 1 << 19, 0, 0, 0, 0}, false});
    stages.push_back(g);
  }
  const std::string svg = memory_svg("title <x>", stages);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  for (const char* label : {"stage 0", "stage 1", "stage 2", "stage 3", "rank 0", "title &lt;x&gt;"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the measured bar's outline
}

}  // namespace
}  // namespace zdp::profile
