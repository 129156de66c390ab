// The engine's own kernels in the GPU step model (planner/engine_kernels.h) against
// numbers computed by hand: per bucket, sliced as the stage slices them, each launch
// floored at the launch time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/engine_kernels.h"
#include "tests/unit/round_gpu.h"

namespace zdp::launcher {
namespace {

using testing::halves;

const KernelCost* find(const std::vector<KernelCost>& rows, const std::string& name) {
  for (const KernelCost& k : rows) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// Two buckets of 600 and 400 elements on 4 ranks at stage 1, bf16 everywhere, one
// micro-batch: nothing is accumulated or cast (the reduction sends the trainer's
// gradient); the statistics read a quarter of each bucket, 2 x 150 and 2 x 100 bytes at
// 0.5 GB/s = 0.6 + 0.4 us; AdamW updates a quarter of each, (24 + 2 + 2) x 150 = 4200
// and 2800 bytes = 8.4 + 5.6 us.
TEST(EngineKernels, BucketsAreSlicedAsTheStageSlicesThem) {
  EngineKernelShape s;
  s.bucket_elems = {600, 400};
  s.world = 4, s.stage = 1, s.accum_steps = 1, s.compute_bytes = 2, s.reduce_bytes = 2;
  const GpuSpec g = testing::round_gpu(1e9);
  const std::vector<KernelCost> rows = engine_kernels(s, g, halves());
  for (const KernelCost& k : rows) EXPECT_EQ(k.name.find("grad accumulate"), std::string::npos) << k.name;
  EXPECT_EQ(find(rows, "grad cast to the reduce dtype"), nullptr);
  const KernelCost* norm = find(rows, "grad norm statistics (slice + fold)");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->calls, 4);
  EXPECT_DOUBLE_EQ(norm->time_s, 1.0e-6);
  const KernelCost* adam = find(rows, "adamw (per bucket, once per step)");
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->calls, 2);
  EXPECT_NEAR(adam->time_s, 14e-6, 1e-18);
  // Stage 0 updates whole buckets: 28 x 1000 bytes = 56 us; the statistics stay 1/K.
  s.stage = 0;
  const std::vector<KernelCost> whole = engine_kernels(s, g, halves());
  EXPECT_NEAR(find(whole, "adamw (per bucket, once per step)")->time_s, 56e-6, 1e-18);
  EXPECT_DOUBLE_EQ(find(whole, "grad norm statistics (slice + fold)")->time_s, 1.0e-6);
  // A launch floor of 10 us: each of the statistics' 4 launches and AdamW's 2 costs it.
  GpuEfficiency floor = halves();
  floor.launch_s = 10e-6;
  s.stage = 1;
  const std::vector<KernelCost> floored = engine_kernels(s, g, floor);
  EXPECT_DOUBLE_EQ(find(floored, "grad norm statistics (slice + fold)")->time_s, 40e-6);
  EXPECT_EQ(find(floored, "grad norm statistics (slice + fold)")->bound, "launch");
  EXPECT_DOUBLE_EQ(find(floored, "adamw (per bucket, once per step)")->time_s, 20e-6);
  EXPECT_DOUBLE_EQ(find(floored, "step decision + its copy to the host")->time_s, 20e-6);
  const EngineKernelTimes t = engine_kernel_times(s, g, floor);
  EXPECT_DOUBLE_EQ(t.optimizer_s, 20e-6);
  EXPECT_DOUBLE_EQ(t.total_s, 80e-6);
}

// Accumulation: local (a copy, adds, the last micro-batch's fold into the reduce dtype,
// whole buckets at every stage) or sharded at stages 2-3 (a cast every micro-batch).
TEST(EngineKernels, AccumulationFoldsWholeBucketsWhateverTheStage) {
  EngineKernelShape s;
  s.bucket_elems = {1000};
  s.world = 8, s.stage = 3, s.accum_steps = 4, s.compute_bytes = 2, s.reduce_bytes = 4;
  const GpuSpec g = testing::round_gpu(1e9);
  const std::vector<KernelCost> rows = engine_kernels(s, g, halves());
  // copy 6000 B -> 12 us; 2 adds of 10,000 B -> 40 us; the fold 10,000 B -> 20 us.
  EXPECT_DOUBLE_EQ(find(rows, "grad accumulate: copy into fp32")->time_s, 12e-6);
  EXPECT_DOUBLE_EQ(find(rows, "grad accumulate: add into fp32")->time_s, 40e-6);
  EXPECT_EQ(find(rows, "grad accumulate: add into fp32")->calls, 2);
  EXPECT_DOUBLE_EQ(find(rows, "grad + accumulation -> reduce dtype")->time_s, 20e-6);
  s.sharded_accumulation = true;
  const std::vector<KernelCost> sharded = engine_kernels(s, g, halves());
  // A cast of every micro-batch's bucket: 4 x 6000 B -> 48 us.
  EXPECT_EQ(find(sharded, "grad accumulate: copy into fp32"), nullptr);
  EXPECT_DOUBLE_EQ(find(sharded, "grad cast to the reduce dtype")->time_s, 48e-6);
  EXPECT_EQ(find(sharded, "grad cast to the reduce dtype")->calls, 4);
  // One micro-batch with a reduce dtype other than the compute dtype: a cast.
  s.sharded_accumulation = false;
  s.accum_steps = 1;
  EXPECT_DOUBLE_EQ(find(engine_kernels(s, g, halves()), "grad cast to the reduce dtype")->time_s, 12e-6);
}

}  // namespace
}  // namespace zdp::launcher
