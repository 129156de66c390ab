// The engine's buffer-size rules (engine/src/buffer_plan.h) through plan_memory(), in closed
// form on small layouts: the model states against docs/design.md's formula (equal without
// padding, larger by exactly the padding with it), the gradient copies, the staging and
// gather buffers of stages 2-3, the workspace, and the arguments plan_memory refuses.
// tests/multiproc/memory_plan_test.cc holds the same plan to real engines' accounting.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "kernels/grad_check.h"
#include "zdp/memory_plan.h"
#include "engine/src/zero_memory.h"

namespace zdp {
namespace {

// Options whose buckets hold `bucket_elems` elements of `compute`.
EngineOptions options(int stage, int64_t bucket_elems, DType compute = DType::kF32, DType reduce = DType::kF32) {
  EngineOptions o;
  o.zero.stage = stage;
  o.compute_dtype = compute;
  o.zero.reduce_dtype = reduce;
  o.zero.bucket_mb = static_cast<double>(bucket_elems * static_cast<int64_t>(dtype_size(compute))) / (1 << 20);
  return o;
}

MemoryPlan plan_ok(const std::vector<ParamDecl>& params, const EngineOptions& o, int world) {
  StatusOr<MemoryPlan> plan = plan_memory(params, o, world, DeviceKind::kCpu);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  return plan.ok() ? *plan : MemoryPlan{};
}

// Two layer groups, 128 + 64 elements: at K = 2 (slices of 32-element multiples) and
// 64-element buckets nothing is padded; "a" straddles buckets 0 and 1.
const std::vector<ParamDecl> kTwoGroups = {{"a", {128}, 0}, {"b", {8, 8}, 1}};

TEST(BufferPlan, WithoutPaddingTheModelStatesAreTheFormula) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const int c = static_cast<int>(dtype_size(dtype));
      const MemoryPlan p = plan_ok(kTwoGroups, options(stage, 64, dtype, dtype), 2);
      const ZeroMemory f = *zero_memory_formula(192, 2, stage, c);
      EXPECT_EQ(p.psi, 192);
      EXPECT_EQ(p.padded_elems, 192) << stage;
      EXPECT_EQ(p.shard_elems, 96) << stage;
      EXPECT_EQ(p.bucket_elems, (std::vector<int64_t>{64, 64, 64})) << stage;
      EXPECT_EQ(p.states.params, f.params) << stage;
      EXPECT_EQ(p.states.grads, f.grads) << stage;
      EXPECT_EQ(p.states.master, f.master) << stage;
      EXPECT_EQ(p.states.m, f.m) << stage;
      EXPECT_EQ(p.states.v, f.v) << stage;
      EXPECT_EQ(p.states.reduce_copy + p.states.accum, 0) << stage;
      EXPECT_EQ(p.states.total(), p.formula) << stage;
      EXPECT_EQ(static_cast<double>(p.formula), f.total()) << stage;
    }
  }
}

TEST(BufferPlan, OptimizerStateIsWhatTheOptimizerKeeps) {
  // AdamW: master, m and v; SGD with momentum: master and its momentum buffer (m); plain
  // SGD: the master alone. The formula counts the same tensors (4 (1 + moments) Psi).
  struct Case {
    OptimizerKind name;
    double beta1;  // SGD's momentum
    int moments;
  };
  for (const Case& k : {Case{OptimizerKind::kAdamW, 0.9, 2}, Case{OptimizerKind::kAdamW, 0.0, 2},
                        Case{OptimizerKind::kSgd, 0.9, 1}, Case{OptimizerKind::kSgd, 0.0, 0}}) {
    for (int stage = 0; stage <= 3; ++stage) {
      EngineOptions o = options(stage, 64);
      o.optim.name = k.name;
      o.optim.beta1 = k.beta1;
      const MemoryPlan p = plan_ok(kTwoGroups, o, 2);
      const int64_t state = (stage == 0 ? 192 : 96) * 4;
      const std::string what = std::string(to_string(k.name)) + " beta1 " + std::to_string(k.beta1) +
                               ", stage " + std::to_string(stage);
      EXPECT_EQ(p.states.master, state) << what;
      EXPECT_EQ(p.states.m, k.moments >= 1 ? state : 0) << what;
      EXPECT_EQ(p.states.v, k.moments >= 2 ? state : 0) << what;
      EXPECT_EQ(p.bytes(MemCategory::kOptimizer), (1 + k.moments) * state) << what;
      const ZeroMemory f = *zero_memory_formula(192, 2, stage, 4, k.moments);
      EXPECT_EQ(static_cast<double>(p.states.master + p.states.m + p.states.v), f.master + f.m + f.v) << what;
      EXPECT_EQ(p.states.total(), p.formula) << what;
    }
  }
  EXPECT_NE(zero_memory_formula(10, 2, 1, 2, 3).status().message().find("0, 1 or 2 fp32 tensors, got 3"),
            std::string::npos);
}

TEST(BufferPlan, StagingIsTwoOfTheLargestGradientGroup) {
  // "a" joins buckets 0 and 1 into one gradient group of 128 elements; "b" is one of 64.
  for (int stage = 0; stage <= 3; ++stage) {
    const MemoryPlan p = plan_ok(kTwoGroups, options(stage, 64), 2);
    EXPECT_EQ(p.buffers.grad_staging, stage >= 2 ? 2 * 128 * 4 : 0) << stage;
    EXPECT_EQ(p.buffers.reduce_staging, 0) << stage;  // no cast, no accumulation
    EXPECT_EQ(p.bytes(MemCategory::kBuckets), p.buffers.grad_staging + p.buffers.param_gather) << stage;
  }
}

TEST(BufferPlan, StageThreeGathersOnePlusPrefetchOfTheLargestLayerGroup) {
  for (int prefetch : {0, 1, 5, 65536}) {
    EngineOptions o = options(3, 64);
    o.zero.prefetch_layers = prefetch;
    const MemoryPlan p = plan_ok(kTwoGroups, o, 2);
    EXPECT_EQ(p.group_elems, (std::vector<int64_t>{128, 64}));
    // One buffer per gathered group, each the size of the largest (slots are reused by
    // any group); no more than the groups there are (2 here: 5 gave 6 buffers, and
    // INT_MAX a negative count).
    EXPECT_EQ(p.buffers.param_gather, (1 + std::min(prefetch, 1)) * 128 * 4) << prefetch;
  }
  EngineOptions huge = options(3, 64);
  huge.zero.prefetch_layers = 65537;  // past kMaxLayers: refused with its key
  EXPECT_FALSE(plan_memory(kTwoGroups, huge, 2, DeviceKind::kCpu).ok());
  for (int stage = 0; stage <= 2; ++stage) {
    const MemoryPlan p = plan_ok(kTwoGroups, options(stage, 64), 2);
    EXPECT_EQ(p.buffers.param_gather, 0) << stage;
    EXPECT_TRUE(p.group_elems.empty()) << stage;
  }
}

TEST(BufferPlan, WithPaddingTheGapIsThePaddingInEachDtype) {
  // 37 elements on 2 ranks: one bucket padded to 2 x 32 = 64, shard 32.
  const std::vector<ParamDecl> odd = {{"w", {37}, 0}};
  const MemoryPlan p1 = plan_ok(odd, options(1, 1 << 20), 2);
  const ZeroMemory f1 = *zero_memory_formula(37, 2, 1, 4);
  EXPECT_EQ(p1.padded_elems, 64);
  EXPECT_EQ(p1.states.params - f1.params, 4 * (64 - 37));
  EXPECT_EQ(p1.states.grads - f1.grads, 4 * (64 - 37));
  EXPECT_DOUBLE_EQ(static_cast<double>(p1.states.master) - f1.master, 4 * (32 - 18.5));
  const MemoryPlan p2 = plan_ok(odd, options(2, 1 << 20, DType::kBF16, DType::kBF16), 2);
  EXPECT_EQ(p2.states.params, 2 * 64);
  EXPECT_EQ(p2.states.grads, 2 * 32);
  EXPECT_EQ(p2.buffers.grad_staging, 2 * 2 * 64);
  EXPECT_LT(p2.formula, p2.states.total());
}

TEST(BufferPlan, CopiesForACastAndForAccumulation) {
  // bf16 compute reduced in fp32: stages 0-1 keep an fp32 copy of the gradient, stages
  // 2-3 reduce through 2 fp32 bucket buffers and keep the owned shard in fp32.
  for (int stage = 0; stage <= 3; ++stage) {
    const MemoryPlan p = plan_ok(kTwoGroups, options(stage, 64, DType::kBF16, DType::kF32), 2);
    EXPECT_EQ(p.states.reduce_copy, stage <= 1 ? 4 * 192 : 0) << stage;
    EXPECT_EQ(p.states.grads, stage <= 1 ? 2 * 192 : 4 * 96) << stage;
    EXPECT_EQ(p.buffers.reduce_staging, stage >= 2 ? 2 * 4 * 64 : 0) << stage;
  }
  // accum_steps > 1: a full fp32 accumulation at every stage, and reduce staging at 2-3.
  for (int stage = 0; stage <= 3; ++stage) {
    EngineOptions o = options(stage, 64);
    o.accum_steps = 2;
    const MemoryPlan p = plan_ok(kTwoGroups, o, 2);
    EXPECT_EQ(p.states.accum, 4 * 192) << stage;
    EXPECT_EQ(p.buffers.reduce_staging, stage >= 2 ? 2 * 4 * 64 : 0) << stage;
    EXPECT_EQ(p.bytes(MemCategory::kGrads), p.states.grads + p.states.accum) << stage;
  }
  // bf16 compute, fp32 reduction, accum_steps 2: stages 0-1 accumulate in the fp32 reduce
  // copy (no buffer of their own); stages 2-3 keep the full fp32 accumulation.
  for (int stage = 0; stage <= 3; ++stage) {
    EngineOptions o = options(stage, 64, DType::kBF16, DType::kF32);
    o.accum_steps = 2;
    const MemoryPlan p = plan_ok(kTwoGroups, o, 2);
    EXPECT_EQ(p.states.accum, stage <= 1 ? 0 : 4 * 192) << stage;
    EXPECT_EQ(p.states.reduce_copy, stage <= 1 ? 4 * 192 : 0) << stage;
  }
}

TEST(BufferPlan, ShardedAccumulationKeepsTheGradientsSharded) {
  // K = 4, accum_steps 2, 64-element buckets, each padded to 128 (4 slices of 32): T = 256,
  // S = 64. Local: the r S shard + the 4 T fp32 accumulation + 2 reduce buckets; sharded:
  // the shard itself in fp32 (4 S), nothing else. fp32 reduction: exactly 4 T less.
  for (int stage : {2, 3}) {
    EngineOptions local = options(stage, 64);
    local.accum_steps = 2;
    EngineOptions sharded = local;
    sharded.zero.accumulate = GradAccumulation::kSharded;
    const MemoryPlan l = plan_ok(kTwoGroups, local, 4), s = plan_ok(kTwoGroups, sharded, 4);
    ASSERT_EQ(l.padded_elems, 256) << stage;
    ASSERT_EQ(l.shard_elems, 64) << stage;
    EXPECT_EQ(l.bytes(MemCategory::kGrads), 4 * 64 + 4 * 256) << stage;
    EXPECT_EQ(s.bytes(MemCategory::kGrads), 4 * 64) << stage;
    EXPECT_EQ(s.states.accum, 0) << stage;
    EXPECT_EQ(l.bytes(MemCategory::kGrads) - s.bytes(MemCategory::kGrads), 4 * l.padded_elems) << stage;
    EXPECT_EQ(l.buffers.reduce_staging, 2 * 4 * 128) << stage;
    EXPECT_EQ(s.buffers.reduce_staging, 0) << stage;
    EXPECT_EQ(s.buffers.grad_staging, l.buffers.grad_staging) << stage;
    // bf16 reduction: the shard grows from 2 S to 4 S (fp32 accumulation); a bf16 cast
    // still needs the 2 reduce buckets, in bf16.
    local.zero.reduce_dtype = sharded.zero.reduce_dtype = DType::kBF16;
    const MemoryPlan lb = plan_ok(kTwoGroups, local, 4), sb = plan_ok(kTwoGroups, sharded, 4);
    EXPECT_EQ(lb.bytes(MemCategory::kGrads), 2 * 64 + 4 * 256) << stage;
    EXPECT_EQ(sb.bytes(MemCategory::kGrads), 4 * 64) << stage;
    EXPECT_EQ(sb.buffers.reduce_staging, 2 * 2 * 128) << stage;
  }
  // accum_steps 1: sharded changes nothing.
  EngineOptions one = options(2, 64);
  const MemoryPlan base = plan_ok(kTwoGroups, one, 4);
  one.zero.accumulate = GradAccumulation::kSharded;
  EXPECT_EQ(plan_ok(kTwoGroups, one, 4).total(), base.total());
}

TEST(BufferPlan, WorkspaceIsGradStatsPerBucketPlusTheCudaNormScratch) {
  const EngineOptions o = options(1, 64);
  const MemoryPlan cpu = plan_ok(kTwoGroups, o, 2);
  EXPECT_EQ(cpu.buffers.workspace, 3 * static_cast<int64_t>(sizeof(kernels::GradStats)));
  const MemoryPlan cuda = *plan_memory(kTwoGroups, o, 2, DeviceKind::kCuda);
  EXPECT_EQ(cuda.buffers.workspace, cpu.buffers.workspace + std::max<int64_t>(1, kernels::grad_check_workspace_bytes(64 / 2)));
  EXPECT_EQ(cuda.total() - cpu.total(), cuda.buffers.workspace - cpu.buffers.workspace);
}

TEST(BufferPlan, RefusesWhatFinalizeRefuses) {
  const StatusOr<MemoryPlan> no_world = plan_memory(kTwoGroups, options(1, 64), 0, DeviceKind::kCpu);
  EXPECT_EQ(no_world.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_world.status().message().find("plan_memory: world size 0 is not >= 1"), std::string::npos);
  EngineOptions bad = options(3, 64);
  bad.zero.prefetch_layers = -1;
  const StatusOr<MemoryPlan> prefetch = plan_memory(kTwoGroups, bad, 2, DeviceKind::kCpu);
  EXPECT_NE(prefetch.status().message().find("zero.prefetch_layers = -1 is out of range"), std::string::npos)
      << prefetch.status().to_string();
  EngineOptions sharded_ddp = options(1, 64);
  sharded_ddp.zero.accumulate = GradAccumulation::kSharded;
  const StatusOr<MemoryPlan> sharded = plan_memory(kTwoGroups, sharded_ddp, 2, DeviceKind::kCpu);
  EXPECT_NE(sharded.status().message().find("zero.accumulate = \"sharded\" needs zero.stage 2 or 3"), std::string::npos)
      << sharded.status().to_string();
  const StatusOr<MemoryPlan> twice = plan_memory({{"a", {4}, 0}, {"a", {4}, 0}}, options(1, 64), 2, DeviceKind::kCpu);
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("plan_memory: layout"), std::string::npos) << twice.status().to_string();
  // The deterministic norm's element limit (finalize() refused it; the plan printed one).
  EngineOptions exact = options(0, int64_t{1} << 30);
  exact.deterministic = true;
  const std::vector<ParamDecl> eight_g = {{"w", {int64_t{1} << 17, int64_t{1} << 16}, 0}};  // 2^33 elements
  const StatusOr<MemoryPlan> too_big = plan_memory(eight_g, exact, 2, DeviceKind::kCpu);
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("plan_memory: train.deterministic: the model's 8589934592 padded elements "
                                            "exceed the exact gradient norm's limit of 4294967296"),
            std::string::npos)
      << too_big.status().to_string();
  exact.deterministic = false;
  EXPECT_TRUE(plan_memory(eight_g, exact, 2, DeviceKind::kCpu).ok());
}

TEST(ParamDecl, NumelSaturatesInsteadOfWrapping) {
  EXPECT_EQ((ParamDecl{"w", {3, 4}, 0}.numel()), 12);
  EXPECT_EQ((ParamDecl{"w", {int64_t{1} << 32, int64_t{1} << 32}, 0}.numel()), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace zdp
