// The planner's alpha-beta collective model and step-time prediction against numbers
// computed by hand, and the scaling report's Amdahl fit against series with a known
// serial fraction.
#include <gtest/gtest.h>

#include "planner/plan_command.h"
#include "planner/plan_cost.h"
#include "planner/plan_report.h"
#include "planner/scale_report.h"
#include "zdp/config.h"

namespace zdp::launcher {
namespace {

const LinkModel kLink{10e-6, 1e9, "test"};  // 10 us per message, 1 GB/s

TEST(RingCollectives, AlphaBetaStepsPerAlgorithm) {
  // 8 MB over 4 ranks: each ring step moves 2 MB (2 ms) after 10 us.
  EXPECT_NEAR(ring_reduce_scatter_s(8e6, 4, kLink), 3 * 2.01e-3, 1e-12);
  EXPECT_NEAR(ring_all_gather_s(8e6, 4, kLink), 3 * 2.01e-3, 1e-12);
  EXPECT_NEAR(ring_all_reduce_s(8e6, 4, kLink), 6 * 2.01e-3, 1e-12);
  EXPECT_EQ(ring_all_reduce_s(8e6, 1, kLink), 0.0);  // one rank: nothing to send
  EXPECT_NEAR(ring_all_reduce_s(0, 8, kLink), 14 * 10e-6, 1e-15);  // latency only
}

// Two fp32 buckets of 1M elements on 2 ranks; 3 ms of compute per micro-batch (2 ms backward).
StepWork two_buckets(int stage) {
  StepWork w;
  w.stage = stage;
  w.world_size = 2;
  w.bucket_elems = {1000000, 1000000};
  w.group_elems = {1000000, 1000000};
  w.flops_per_micro = 3e9;
  w.flops_per_s = 1e12;
  return w;
}

TEST(PredictStep, Stage0OverlapsTheAllReducesWithBackward) {
  // All-reduce of 4 MB on 2 ranks: 2 x (10 us + 2 ms) = 4.02 ms. The last bucket is ready
  // at 1 ms (half of backward) and ends at 5.02; the first is ready at 2 ms and ends at
  // 9.04: 7.04 ms past backward, + the norm all-reduce 2 x 10 us.
  const StepPrediction p = predict_step(two_buckets(0), kLink);
  EXPECT_NEAR(p.compute_s, 3e-3, 1e-12);
  EXPECT_NEAR(p.reduce_s, 8.04e-3, 1e-12);
  EXPECT_NEAR(p.small_s, 20e-6, 1e-15);
  EXPECT_NEAR(p.exposed_comm_s, 7.06e-3, 1e-12);
  EXPECT_NEAR(p.step_s, 10.06e-3, 1e-12);
  EXPECT_NEAR(p.sent_bytes, 8e6, 1e-3);  // 2 (K-1)/K x 8 MB
  StepWork off = two_buckets(0);
  off.overlap = false;  // both wait for the end of backward: 2 + 8.04 ms
  EXPECT_NEAR(predict_step(off, kLink).exposed_comm_s, 8.04e-3 + 20e-6, 1e-12);
}

TEST(PredictStep, BucketsAreReadyWhenTheModelsBackwardSaysSo) {
  // Stage 1, reduce-scatters of 2.01 ms. The last bucket ready at 3/4 of the 2 ms backward
  // (1.5 ms, where elements would say 1 ms) ends at 3.51; the first, ready at the end
  // (2 ms), starts after it and ends at 5.52: 3.52 ms past backward (elements: 3.02).
  StepWork w = two_buckets(1);
  w.bucket_ready = {1.0, 0.75};
  EXPECT_NEAR(predict_step(w, kLink).exposed_comm_s, 3.52e-3 + 4.02e-3 + 20e-6, 1e-12);
  // Both ready at the start of backward: the stream runs them back to back from 0, ending
  // at 4.02 ms: 2.02 past backward.
  w.bucket_ready = {0.0, 0.0};
  EXPECT_NEAR(predict_step(w, kLink).exposed_comm_s, 2.02e-3 + 4.02e-3 + 20e-6, 1e-12);
  // A list that is not one per bucket is not used: the elements' share.
  w.bucket_ready = {0.0};
  EXPECT_NEAR(predict_step(w, kLink).exposed_comm_s, predict_step(two_buckets(1), kLink).exposed_comm_s, 1e-15);
}

TEST(PredictStep, ABucketIsReadyWithItsLatestParameter) {
  // Bucket 0 holds params 0-1, bucket 1 params 1-3 (param 1 spans both).
  EXPECT_EQ(bucket_ready_fractions({{0, 1}, {1, 3}}, {1.0, 0.2, 0.5, 0.3}), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(bucket_ready_fractions({{0, 0}, {0, 0}}, {0.25}), (std::vector<double>{0.25, 0.25}));
  EXPECT_TRUE(bucket_ready_fractions({{0, 1}}, {}).empty()) << "a model that states none";
}

TEST(PredictStep, Stages1And2AddAnExposedAllGather) {
  // Reduce-scatter 2.01 ms per bucket: 1 -> 3.01, 3.01 -> 5.02 (3.02 exposed); the
  // all-gathers after the optimizer 2 x 2.01 ms, all exposed.
  for (int stage : {1, 2}) {
    const StepPrediction p = predict_step(two_buckets(stage), kLink);
    EXPECT_NEAR(p.reduce_s, 4.02e-3, 1e-12);
    EXPECT_NEAR(p.gather_s, 4.02e-3, 1e-12);
    EXPECT_NEAR(p.exposed_comm_s, 3.02e-3 + 4.02e-3 + 20e-6, 1e-12);
    EXPECT_NEAR(p.sent_bytes, 8e6, 1e-3);  // the same volume as stage 0: 2 Psi (K-1)/K
  }
}

// Stage 3 as the engine gathers (engine/src/param_gatherer.cc): two layer groups, two
// buffers, prefetch 1. Forward: group 1's gather (2.01 ms) exposed, group 2's prefetched
// behind it and group 1's 0.5 ms of forward: 1.51. Backward finds both still gathered
// (the old model gathered them again: 4 gathers, 12 MB). Reductions 3.02 as at stage 1.
TEST(PredictStep, Stage3GathersAsTheEngineDoesBehindThePreviousGroup) {
  const StepPrediction p = predict_step(two_buckets(3), kLink);
  EXPECT_NEAR(p.gather_s, 2 * 2.01e-3, 1e-12);
  EXPECT_NEAR(p.exposed_comm_s, 3.52e-3 + 3.02e-3 + 20e-6, 1e-12);
  EXPECT_NEAR(p.sent_bytes, 8e6, 1e-3);  // Psi (K-1)/K x 4 bytes reduced, the same gathered
  StepWork accum = two_buckets(3);
  accum.accum_steps = 2;  // the second micro-batch finds both groups still gathered
  EXPECT_NEAR(predict_step(accum, kLink).sent_bytes, 8e6, 1e-3);
  // prefetch_layers 0: one buffer, nothing hides. Forward: gather 1 (0 -> 2.01), compute
  // to 2.51, gather 2 (2.51 -> 4.52), compute to 5.02; backward: group 2 still held (to
  // 6.02), group 1 gathered again (6.02 -> 8.03), compute to 9.03: 6.03 ms exposed.
  StepWork none = two_buckets(3);
  none.prefetch_layers = 0;
  const StepPrediction q = predict_step(none, kLink);
  EXPECT_NEAR(q.gather_s, 3 * 2.01e-3, 1e-12);
  EXPECT_NEAR(q.exposed_comm_s, 6.03e-3 + 3.02e-3 + 20e-6, 1e-12);
  EXPECT_NEAR(q.sent_bytes, 10e6, 1e-3);
}

// Stage 3's backward gathers and reductions on one stream: four groups, two buffers;
// backward finds groups 4 and 3 still gathered and gathers 2 and 1 (0.45 ms each, hidden
// behind a group's 0.5 ms of backward); the reductions (0.45 ms) each fit before the next
// bucket is ready, but not with the gathers: 2 x 0.45 + 4 x 0.45 = 2.7 ms in a 2 ms
// backward. Separately they exposed 0.45 + 0 ms; together 0.7.
TEST(PredictStep, Stage3GathersAndReductionsShareTheStreamInBackward) {
  StepWork w;
  w.stage = 3;
  w.world_size = 2;
  w.bucket_elems = {220000, 220000, 220000, 220000};  // 0.44 ms + 10 us each way
  w.group_elems = w.bucket_elems;
  w.flops_per_micro = 3e9;  // 3 ms: forward 0.25 ms a group, backward 0.5
  w.flops_per_s = 1e12;
  const StepPrediction p = predict_step(w, kLink);
  // Forward 0.45 + 3 x 0.2; backward (gathers, reductions) together 0.9 + 1.8 - 2; the norm.
  EXPECT_NEAR(p.exposed_comm_s, 1.05e-3 + 0.7e-3 + 20e-6, 1e-12);
}

// Four groups of 1M fp32 elements at K = 2 (1.01 ms a collective on kLink), stage 3 with
// sharded accumulation: each micro-batch reduce-scatters all four and the forward and
// backward gather them again, all on one stream. The predicted step was shorter than the
// collectives it carried (34.45 ms for 36.18 at accum 2).
TEST(PredictStep, TheStepIsNeverShorterThanItsCollectivesOnOneStream) {
  StepWork w;
  w.stage = 3;
  w.world_size = 2;
  w.sharded_accumulation = true;
  w.bucket_elems = {1000000, 1000000, 1000000, 1000000};
  w.group_elems = w.bucket_elems;
  w.flops_per_micro = 3e9;
  w.flops_per_s = 1e12;
  for (int64_t accum : {1, 2, 4, 8}) {
    w.accum_steps = accum;
    const StepPrediction p = predict_step(w, kLink);
    EXPECT_GE(p.step_s, p.reduce_s + p.gather_s + p.small_s - 1e-12) << "accum " << accum;
    EXPECT_NEAR(p.step_s, p.compute_s + p.exposed_comm_s, 1e-12);
  }
}

TEST(PredictStep, ShardedAccumulationReducesEveryMicroBatch) {
  // Stage 2, accum_steps 2 (6 ms of compute), reduce-scatters of 2.01 ms. Times from the
  // last backward's start: the first micro-batch's buckets are ready at -2 and -1 ms and
  // end at 0.01 and 2.02; the last one's, ready at 1 and 2, wait for that backlog: 4.03
  // and 6.04, so 4.04 ms past backward (local accumulation: 3.02), + the all-gathers 4.02
  // + the norm 0.02. Sent: the reduce-scatter twice (2 x 4 MB) + the all-gather (4 MB).
  StepWork w = two_buckets(2);
  w.accum_steps = 2;
  const StepPrediction local = predict_step(w, kLink);
  EXPECT_NEAR(local.reduce_s, 4.02e-3, 1e-12);
  EXPECT_NEAR(local.exposed_comm_s, 3.02e-3 + 4.02e-3 + 20e-6, 1e-12);
  EXPECT_NEAR(local.sent_bytes, 8e6, 1e-3);
  w.sharded_accumulation = true;
  const StepPrediction sharded = predict_step(w, kLink);
  EXPECT_NEAR(sharded.compute_s, 6e-3, 1e-12);
  EXPECT_NEAR(sharded.reduce_s, 8.04e-3, 1e-12);
  EXPECT_NEAR(sharded.exposed_comm_s, 4.04e-3 + 4.02e-3 + 20e-6, 1e-12);
  EXPECT_NEAR(sharded.step_s, 6e-3 + 8.08e-3, 1e-12);
  EXPECT_NEAR(sharded.sent_bytes, 12e6, 1e-3);
  // 30 ms micro-batches: the first micro-batch's reductions end (at -17.99 and -7.99 ms)
  // long before the last backward, which then waits as much as with local accumulation.
  w.flops_per_micro = 30e9;
  EXPECT_NEAR(predict_step(w, kLink).exposed_comm_s, 2.01e-3 + 4.02e-3 + 20e-6, 1e-12);
  // Stages 0-1 have no sharded accumulation: the flag changes nothing there.
  StepWork ddp = two_buckets(1);
  ddp.accum_steps = 2;
  ddp.sharded_accumulation = true;
  EXPECT_NEAR(predict_step(ddp, kLink).sent_bytes, 8e6, 1e-3);
}

TEST(PredictStep, TheOptimizerStepIsWholeAtStage0AndAShardAbove) {
  // 4 ms of optimizer over all parameters: a rank runs all of it at stage 0 (or alone) and
  // its half of it on 2 ranks at stages 1-3, after the communication the step waits for.
  StepWork w = two_buckets(0);
  w.optimizer_s = 4e-3;
  const StepPrediction p0 = predict_step(w, kLink);
  EXPECT_NEAR(p0.optimizer_s, 4e-3, 1e-15);
  EXPECT_NEAR(p0.compute_s, 3e-3 + 4e-3, 1e-12);
  EXPECT_NEAR(p0.step_s, 10.06e-3 + 4e-3, 1e-12);
  EXPECT_NEAR(p0.exposed_comm_s, 7.06e-3, 1e-12) << "the optimizer does not move the reductions";
  for (int stage : {1, 2, 3}) {
    StepWork s = two_buckets(stage);
    s.optimizer_s = 4e-3;
    const StepPrediction p = predict_step(s, kLink);
    EXPECT_NEAR(p.optimizer_s, 2e-3, 1e-15) << stage;
    EXPECT_NEAR(p.step_s, predict_step(two_buckets(stage), kLink).step_s + 2e-3, 1e-12) << stage;
  }
  StepWork alone = two_buckets(2);
  alone.world_size = 1;
  alone.optimizer_s = 4e-3;
  EXPECT_NEAR(predict_step(alone, kLink).optimizer_s, 4e-3, 1e-15);
}

// configs/quickstart.toml planned at 4 ranks with plenty of memory: without the optimizer's
// time, stage 0 (the least communication) is recommended; with a slow optimizer step, the
// lowest stage that shards it wins, and the reason says why.
TEST(PlanReport, RecommendsTheLowestStageWithinOnePercentOfTheFastest) {
  StatusOr<Config> config = load_config(std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", {});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  PlannerInputs in;
  in.worlds = {4};
  in.device_memory = int64_t{1} << 40;
  in.link = {10e-6, 50e9, "test"};
  in.flops_per_s = 1e12;
  const PlanReport plain = build_plan_report(*config, "quickstart.toml", in).value();
  EXPECT_EQ(plain.worlds[0].recommended, 0);
  EXPECT_NE(plain.worlds[0].reason.find("stage 0, the lowest stage that fits"), std::string::npos)
      << plain.worlds[0].reason;
  in.optimizer_s = 1.0;  // a second: stages 1-3 save 0.75 s of it per rank
  const PlanReport sharded = build_plan_report(*config, "quickstart.toml", in).value();
  const WorldPlan& w = sharded.worlds[0];
  EXPECT_EQ(w.recommended, 1);
  EXPECT_NEAR(w.stages[0].time.step_s - w.stages[1].time.step_s, 0.75 - (w.stages[1].time.exposed_comm_s -
                                                                        w.stages[0].time.exposed_comm_s),
              1e-9);
  EXPECT_NE(w.reason.find("stage 1, the lowest stage that fits within 1% of the fastest"), std::string::npos)
      << w.reason;
  EXPECT_NE(w.reason.find("by its 1/K share of the optimizer step"), std::string::npos) << w.reason;
  // bf16 compute, fp32 reduction, no optimizer time, a slow link: stage 0's fp32
  // all-reduce sends 4/3 of stage 1's bytes, and stage 1 wins by that alone (the reason
  // said "its 1/K share of the optimizer step", which was 0 here).
  Config bf16 = *config;
  bf16.model.dtype = DType::kBF16;
  in.optimizer_s = 0;
  in.link = {10e-6, 1e6, "test"};
  const WorldPlan slow = build_plan_report(bf16, "quickstart.toml", in).value().worlds[0];
  EXPECT_NEAR(slow.stages[0].time.sent_bytes / slow.stages[1].time.sent_bytes, 4.0 / 3.0, 1e-2);
  EXPECT_EQ(slow.recommended, 1) << slow.reason;
  EXPECT_NE(slow.reason.find("faster than stage 0 by less exposed communication"), std::string::npos) << slow.reason;
}

// The gpt's tied embedding gets its gradient only in the embedding's backward, at the very
// end (the LM head's share waits for it), so at stage 0 the all-reduce of every bucket that
// holds wte is exposed whole. With readiness by elements the planner hid part of it behind
// the blocks' backward (wte's buckets "ready" from 1 - its share of the elements on).
TEST(PlanReport, TheTiedEmbeddingsReductionIsExposedAtStage0) {
  StatusOr<Config> config = load_config(std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", {});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  Config c = *config;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2, c.model.d_model = 64, c.model.n_heads = 4, c.model.seq_len = 32, c.model.vocab_size = 4096;
  c.zero.bucket_mb = 0.25;  // 64Ki fp32 elements: wte's 256Ki span four buckets
  PlannerInputs in;
  in.worlds = {4};
  in.device_memory = int64_t{1} << 40;
  in.link = {1e-6, 2e9, "test"};
  in.flops_per_s = 1e10;
  const PlanReport report = build_plan_report(c, "gpt.toml", in).value();
  ASSERT_EQ(report.model.params[0].name, "wte.weight");
  const StagePlan& s0 = report.worlds[0].stages[0];
  ASSERT_EQ(s0.stage, 0);
  double wte_reduce = 0;
  int wte_buckets = 0;
  for (size_t b = 0; b < s0.memory.bucket_params.size(); ++b) {
    if (s0.memory.bucket_params[b].first != 0) continue;
    wte_reduce += ring_all_reduce_s(4.0 * static_cast<double>(s0.memory.bucket_elems[b]), 4, in.link);
    ++wte_buckets;
  }
  EXPECT_GE(wte_buckets, 4);
  EXPECT_GE(s0.time.exposed_comm_s, wte_reduce + s0.time.small_s - 1e-12);
  // ...and the blocks' reductions hide: at most the last block bucket's runs past backward too.
  EXPECT_LT(s0.time.exposed_comm_s, s0.time.reduce_s);
}

// The world rows' tokens/s and MFU (the issue asks for them per world size): by hand, 64
// samples of 1024 tokens in 0.5 s on 8 ranks of 1 TFLOP/s peak at 1 GFLOP a sample.
TEST(PlanReport, StepRatesAreTheGlobalBatchOverTheStepAndKPeaks) {
  trainer::ModelSpec m;
  m.flops_per_sample = 1e9;
  m.tokens_per_sample = 1024;
  const StepRates r = step_rates(m, 64, 8, 0.5, 1e12);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 131072.0);
  EXPECT_DOUBLE_EQ(r.mfu, 0.016);
  EXPECT_EQ(step_rates(m, 64, 8, 0.5, 0).mfu, -1) << "no peak, no MFU";
}

// A compute rate above the peak MFU divides by is refused naming both: --flops 2e6 GFLOP/s
// on an H100 printed MFU 153%, profile.peak_tflops = 0.001 on the CPU 1986%.
TEST(PlanReport, AComputeRateAboveThePeakIsRefused) {
  StatusOr<Config> config = load_config(std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", {});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  PlannerInputs in;
  in.worlds = {2};
  in.device_memory = int64_t{1} << 40;
  in.link = {10e-6, 50e9, "test"};
  in.flops_per_s = 2e10;
  in.flops_origin = "--flops";
  in.peak_flops_per_s = 1e9;
  const Status above = build_plan_report(*config, "quickstart.toml", in).status();
  EXPECT_EQ(above.message(), "the compute rate 20 GFLOP/s per rank at world size 2 (--flops) is above the peak 1 "
                             "GFLOP/s that MFU divides by (the GPU's datasheet): every MFU would exceed 100%");
  // CPU ranks share a node's cores: at a world smaller than the node's ranks each computes
  // faster than the rate given for the configured one, and that world's rate is checked.
  in.flops_per_s = 1e9;
  in.cpu_cores = 2;
  in.flops_threads = 1;
  in.node_ranks = 2;
  in.worlds = {1, 2};
  ASSERT_GT(in.rank_flops_per_s(1), in.peak_flops_per_s);
  EXPECT_NE(build_plan_report(*config, "quickstart.toml", in).status().message().find("at world size 1 "),
            std::string::npos);
  in.worlds = {2};
  in.cpu_cores = 0;
  in.flops_per_s = 2e10;
  in.peak_flops_per_s = 2e10;  // the rate at the peak: every MFU at most 100%
  const StatusOr<PlanReport> at_peak = build_plan_report(*config, "quickstart.toml", in);
  ASSERT_TRUE(at_peak.ok()) << at_peak.status().to_string();
  for (const WorldPlan& w : at_peak->worlds) {
    for (const StagePlan& s : w.stages) {
      EXPECT_LE(step_rates(at_peak->model, w.global_batch, w.world_size, s.time.step_s, in.peak_flops_per_s).mfu, 1.0);
    }
  }
}

TEST(AmdahlFit, RecoversAKnownSerialFraction) {
  for (double s : {0.0, 0.05, 0.3, 1.0}) {
    std::vector<std::pair<int, double>> series;
    for (int k : {1, 2, 4, 8, 64}) series.emplace_back(k, amdahl_speedup(s, k));
    const AmdahlFit fit = fit_amdahl(series).value();
    EXPECT_NEAR(fit.serial_fraction, s, 1e-7);  // a minimum's flatness: sqrt(epsilon)
    EXPECT_NEAR(fit.rms_error, 0.0, 1e-6);
    EXPECT_EQ(fit.points, 4);
  }
  // Off the law: K = 2, S = 1.6 alone says s = 0.25; K = 4, S = 2.5 alone s = 0.2. The fit
  // is between them where the squared error's derivative, sum (S_K(s) - S) dS_K/ds with
  // dS_K/ds = -S_K(s)^2 (1 - 1/K), vanishes.
  const AmdahlFit fit = fit_amdahl({{1, 1.0}, {2, 1.6}, {4, 2.5}}).value();
  EXPECT_GT(fit.serial_fraction, 0.2);
  EXPECT_LT(fit.serial_fraction, 0.25);
  double slope = 0;
  for (const auto& [k, measured] : std::vector<std::pair<int, double>>{{2, 1.6}, {4, 2.5}}) {
    const double fitted = amdahl_speedup(fit.serial_fraction, k);
    slope += (fitted - measured) * -fitted * fitted * (1.0 - 1.0 / k);
  }
  EXPECT_NEAR(slope, 0.0, 1e-6);
  // Noisy sublinear points: the Karp-Flatt form's least squares weighted the small K and
  // fitted s = 0.0245, S(64) = 25.1 for a measured 40 (rms 7.4); the speed-ups' own least
  // squares give s = 0.0095 and S(64) within 1% of 40.
  const AmdahlFit noisy = fit_amdahl({{1, 1.0}, {2, 1.9}, {4, 3.6}, {8, 6.8}, {64, 40.0}}).value();
  EXPECT_NEAR(amdahl_speedup(noisy.serial_fraction, 64), 40.0, 0.4);
  EXPECT_LT(noisy.rms_error, 0.5);
  // Better than linear (s < 0): fitted above the pole of the largest K, every point counted.
  const AmdahlFit super = fit_amdahl({{1, 1.0}, {2, 2.1}, {4, 4.3}}).value();
  EXPECT_LT(super.serial_fraction, 0.0);
  EXPECT_GT(super.serial_fraction, -1.0 / 3);
  // Slower than one rank (s > 1): a single point's s, past the search's old bound of 2.
  const AmdahlFit slower = fit_amdahl({{1, 1.0}, {4, 0.5}}).value();
  EXPECT_NEAR(slower.serial_fraction, (1 / 0.5 - 0.25) / 0.75, 1e-7);
  EXPECT_FALSE(fit_amdahl({{1, 1.0}}).ok());
  EXPECT_FALSE(fit_amdahl({{2, 0.0}}).ok());
}

TEST(ScaleReport, SpeedupAndEfficiencyFromThroughput) {
  // Weak scaling: the same per-rank work, so ideal samples/s grows with K.
  std::vector<ScalePoint> points(3);
  points[0] = {4, 2, 64, 10, 0.4, 160.0, 0, 0, "4"};
  points[1] = {1, 2, 16, 10, 0.1, 50.0, 0, 0, "1"};
  points[2] = {2, 2, 32, 10, 0.125, 80.0, 0, 0, "2"};
  const ScaleReport r = make_scale_report(points).value();
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].point.world_size, 1);
  EXPECT_DOUBLE_EQ(r.rows[1].speedup, 1.6);
  EXPECT_DOUBLE_EQ(r.rows[1].efficiency, 0.8);  // = T1 / T2 = 0.1 / 0.125
  EXPECT_DOUBLE_EQ(r.rows[2].speedup, 3.2);
  EXPECT_DOUBLE_EQ(r.rows[2].efficiency, 0.8);
  ASSERT_TRUE(r.fit.has_value());
  EXPECT_NEAR(r.rows[2].amdahl, amdahl_speedup(r.fit->serial_fraction, 4), 1e-12);
  EXPECT_NE(format_scale(r, "t").find("Amdahl: serial fraction s = "), std::string::npos);
  EXPECT_EQ(format_scale(r, "t").find("no run at world size 1"), std::string::npos);
  EXPECT_EQ(scale_json(r).size(), 4u);
  // Without K = 1 the columns are relative to the smallest K, and the report says so.
  const ScaleReport from_two = make_scale_report({points[0], points[2]}).value();
  EXPECT_DOUBLE_EQ(from_two.rows[0].speedup, 2.0);
  EXPECT_NE(format_scale(from_two, "t").find("no run at world size 1: speed-up and eta are relative to K = 2"),
            std::string::npos)
      << format_scale(from_two, "t");
}

TEST(PlanArguments, ByteSizes) {
  EXPECT_EQ(parse_byte_size("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(parse_byte_size("512 MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5TB"), int64_t{1500000000000});
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("80 GB"), int64_t{80000000000});
  EXPECT_EQ(parse_byte_size("lots"), -1);
  EXPECT_EQ(parse_byte_size("8 GiBs"), -1);
  EXPECT_EQ(parse_byte_size("-1GiB"), -1);
  EXPECT_EQ(parse_byte_size(".5KiB"), 512);
  // What std::stod takes but no size is; the last two would overflow int64 in the cast.
  for (const char* bad : {"", " 8GiB", "+8GiB", "0x10GiB", "inf", "nan", "1e400GiB", "1e30TB", "4TiB 4"}) {
    EXPECT_EQ(parse_byte_size(bad), -1) << "'" << bad << "'";
  }
  EXPECT_EQ(parse_byte_size("4194304TiB"), int64_t{1} << 62) << "the largest size taken";
}

}  // namespace
}  // namespace zdp::launcher
