// Deterministic mode (EngineOptions::deterministic, train.deterministic) on real rank
// processes (CPU, Gloo): with the step's micro-batches fixed (global batch 24, 2 samples
// each: 12 micro-batches), the fp32 masters, every step's gradient norm and the saved
// model.safetensors and optimizer.safetensors are the same BYTES at 1, 2, 3 and 4 ranks,
// at every stage, with other bucket cuts, without overlap, with sharded accumulation, in
// bf16, and across a resume at another world size and stage. Without the mode the same
// runs differ (the mutation check), so the comparisons can fail.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "testing/engine_comparisons.h"
#include "testing/temp_dir.h"
#include "zdp/config.h"

namespace zdp {
namespace {

using testing::EngineRun;
using testing::EngineRunResult;

constexpr int kSteps = 20;

EngineOptions det_options(int stage, DType dtype = DType::kF32) {
  EngineOptions o = testing::comparison_options(stage);
  o.deterministic = true;
  o.compute_dtype = dtype;
  o.optim.grad_clip = 0.05;  // clipping active: the norm's bits reach the parameters
  return o;
}

// What a run leaves: rank 0's results and the bytes of its last checkpoint's tensors.
struct Outcome {
  EngineRunResult result;
  std::string model, optimizer;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `world` ranks, 12 micro-batches per step: accum_steps = 12 / world.
Outcome run(int world, EngineOptions o, const std::string& load_from = "") {
  testing::TempDir dir;
  o.accum_steps = 12 / world;
  EngineRun r;
  r.world = world;
  r.options = o;
  r.steps = kSteps;
  r.global_batch = 24;
  r.load_from = load_from;
  r.save_root = dir.path() + "/ckpt";
  r.save_steps = {kSteps};
  Outcome out;
  out.result = testing::run_engine(r);
  EXPECT_EQ(out.result.failures, "") << world << " ranks, stage " << o.zero.stage;
  const std::string step = dir.path() + "/ckpt/step-" + std::to_string(kSteps);
  out.model = read_bytes(step + "/model.safetensors");
  out.optimizer = read_bytes(step + "/optimizer.safetensors");
  EXPECT_FALSE(out.model.empty()) << "no checkpoint written";
  return out;
}

bool same_masters(const EngineRunResult& a, const EngineRunResult& b) {
  if (a.masters.size() != b.masters.size()) return false;
  for (size_t p = 0; p < a.masters.size(); ++p) {
    if (a.masters[p].size() != b.masters[p].size() ||
        std::memcmp(a.masters[p].data(), b.masters[p].data(), a.masters[p].size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

// Bit for bit: masters, each step's norm (from step `from` of `b`), and both files.
void expect_identical(const Outcome& a, const Outcome& b, const std::string& what, size_t from = 0) {
  EXPECT_TRUE(same_masters(a.result, b.result)) << what << ": masters differ";
  ASSERT_EQ(a.result.stats.size() + from, b.result.stats.size()) << what;
  for (size_t s = 0; s < a.result.stats.size(); ++s) {
    const double x = a.result.stats[s].grad_norm, y = b.result.stats[s + from].grad_norm;
    EXPECT_EQ(std::memcmp(&x, &y, sizeof(x)), 0) << what << ": step " << s + from << " norm " << x << " vs " << y;
    EXPECT_FALSE(a.result.stats[s].skipped) << what;
  }
  EXPECT_TRUE(a.model == b.model) << what << ": model.safetensors differs";
  EXPECT_TRUE(a.optimizer == b.optimizer) << what << ": optimizer.safetensors differs";
}

TEST(Deterministic, BitIdenticalAcrossWorldSizesAndStages) {
  const Outcome ref = run(1, det_options(0));
  // It trains, and clipping is active (the norm above the threshold).
  EXPECT_GT(ref.result.stats.front().grad_norm, 0.05);
  for (int world : {1, 2, 3, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      if (world == 1 && stage == 0) continue;
      expect_identical(run(world, det_options(stage)), ref,
                       std::to_string(world) + " ranks, stage " + std::to_string(stage));
    }
  }
}

TEST(Deterministic, BitIdenticalAcrossBucketsOverlapAndAccumulation) {
  const Outcome ref = run(1, det_options(0));
  for (int stage : {1, 3}) {
    EngineOptions one_bucket = det_options(stage);
    one_bucket.zero.bucket_mb = 1.0;  // the whole model in one bucket
    expect_identical(run(4, one_bucket), ref, "one bucket, stage " + std::to_string(stage));
    EngineOptions tiny = det_options(stage);
    tiny.zero.bucket_mb = 70.0 * 4 / (1 << 20);  // ~70 elements: other cuts than the default's
    expect_identical(run(2, tiny), ref, "70-element buckets, stage " + std::to_string(stage));
  }
  for (int stage : {0, 2}) {
    EngineOptions no_overlap = det_options(stage);
    no_overlap.zero.overlap = false;
    expect_identical(run(4, no_overlap), ref, "overlap off, stage " + std::to_string(stage));
  }
  for (int stage : {2, 3}) {
    EngineOptions sharded = det_options(stage);
    sharded.zero.accumulate = GradAccumulation::kSharded;
    expect_identical(run(2, sharded), ref, "sharded accumulation, stage " + std::to_string(stage));
  }
  EngineOptions gather = det_options(1);
  gather.overlap_param_gather = true;
  expect_identical(run(3, gather), ref, "overlap_param_gather, stage 1");
}

TEST(Deterministic, BitIdenticalInBf16) {
  const Outcome ref = run(1, det_options(0, DType::kBF16));
  expect_identical(run(2, det_options(2, DType::kBF16)), ref, "bf16, 2 ranks, stage 2");
  expect_identical(run(4, det_options(3, DType::kBF16)), ref, "bf16, 4 ranks, stage 3");
  EngineOptions reduce16 = det_options(1, DType::kBF16);
  reduce16.zero.reduce_dtype = DType::kBF16;
  EngineOptions reduce16_one = det_options(0, DType::kBF16);
  reduce16_one.zero.reduce_dtype = DType::kBF16;
  const Outcome reduce16_ref = run(1, reduce16_one);
  expect_identical(run(3, reduce16), reduce16_ref, "bf16 reduce dtype, 3 ranks, stage 1");
  // Sharded accumulation keeps an fp32 gradient shard; the step's sum is still rounded
  // once into the reduce dtype (it was left in fp32: the bf16 reduce dtype was ignored).
  EngineOptions reduce16_sharded = det_options(2, DType::kBF16);
  reduce16_sharded.zero.reduce_dtype = DType::kBF16;
  reduce16_sharded.zero.accumulate = GradAccumulation::kSharded;
  expect_identical(run(2, reduce16_sharded), reduce16_ref, "bf16 reduce dtype, sharded accumulation, 2 ranks, stage 2");
}

TEST(Deterministic, ResumeAtAnotherWorldSizeAndStageContinuesBitForBit) {
  const Outcome ref = run(1, det_options(0));
  testing::TempDir dir;
  EngineRun first;
  first.world = 2;
  first.options = det_options(1);
  first.options.accum_steps = 6;
  first.steps = 10;
  first.global_batch = 24;
  first.save_root = dir.path() + "/ckpt";
  first.save_steps = {10};
  ASSERT_EQ(testing::run_engine(first).failures, "");
  const Outcome resumed = run(4, det_options(3), dir.path() + "/ckpt/step-10");
  expect_identical(resumed, ref, "2 ranks stage 1 to step 10, then 4 ranks stage 3", 10);
}

// The mutation check: the same comparisons without the mode see different bits (the
// ring and the local accumulation group the sums differently at every world size).
TEST(Deterministic, WithoutTheModeTheRunsDiffer) {
  EngineOptions off = det_options(0);
  off.deterministic = false;
  const Outcome one = run(1, off);
  off.zero.stage = 2;
  const Outcome four = run(4, off);
  EXPECT_FALSE(same_masters(one.result, four.result));
  EXPECT_FALSE(one.model == four.model);
}

// A world size that does not divide the step's micro-batches is refused by the config's
// checks, naming the key and why (the tree over micro-batches would change).
TEST(Deterministic, WorldSizeThatDoesNotDivideTheMicroBatchesIsRefused) {
  Config c;
  c.source = "job.toml";
  c.train.global_batch = 24;
  c.train.micro_batch = 2;
  c.train.deterministic = true;
  EXPECT_TRUE(validate_for_world(c, 4).ok());
  const Status s = validate_for_world(c, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("train.deterministic"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("does not divide the 12 micro-batches"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace zdp
