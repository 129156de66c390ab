// The planner's memory numbers against real engines: for the reference models (mlp and
// gpt, registered by the trainer's own register_params), K = 1, 2, 4 ranks (forked, Gloo)
// and stages 0-3, plan_memory() (what `dp-launch plan` prints) equals, in every category
// and to the byte:
//  - the device's own accounting: the bytes the engine's allocations added to each
//    MemCategory of the Device. This is the independent check (the Device counts every
//    allocation; it shares no code with the plan), hence "DeviceAccounting" in the names;
//  - Engine::memory()'s "measured" column, which the engine's parts report from the sizes
//    they allocated. The plan and the parts size buffers by the same rules
//    (engine/src/buffer_plan.cc), so this equality only shows that the parts follow them.
// The model's activation buffers equal model_spec()'s estimate (device accounting too).
// The other independent check, the plan against the ZeRO formula, is buffer_plan_test's
// WithoutPaddingTheModelStatesAreTheFormula and PlanExceedsTheFormulaByThePaddingOnly here.
// Variants cover gradient accumulation, a bf16 reduction and SGD (smaller optimizer state).
#include <gtest/gtest.h>

#include "testing/engine_runs.h"
#include "trainer/models/model.h"
#include "trainer/models/model_spec.h"
#include "zdp/memory_plan.h"

namespace zdp {
namespace {

using testing::fork_ranks;
using testing::make_test_context;

Config mlp_config() {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.n_layers = 3;
  c.model.d_model = 40;  // 40 x 40 weights: odd sizes, so buckets need padding at K = 4
  c.model.vocab_size = 7;
  c.train.micro_batch = 4;
  c.zero.bucket_mb = 4096.0 * 4 / (1 << 20);  // several buckets per layer group
  return c;
}

Config gpt_config() {
  Config c;
  c.model.kind = ModelKind::kGpt;
  c.model.n_layers = 2;
  c.model.d_model = 24;
  c.model.n_heads = 2;
  c.model.vocab_size = 50;
  c.model.seq_len = 12;
  c.train.micro_batch = 2;
  c.zero.bucket_mb = 1500.0 * 4 / (1 << 20);  // buckets cut inside parameters
  return c;
}

// One engine per stage on this rank; every category of its measured memory must equal the plan.
Status check_stages(Context& ctx, Config config, const std::string& variant) {
  const int K = ctx.world_size();
  ZDP_ASSIGN_OR_RETURN(const trainer::ModelSpec spec, trainer::model_spec(config));
  // Sharded accumulation exists at stages 2-3 only, quantized communication at 1-3.
  const bool quantized = config.zero.reduce_quant != WireQuant::kNone || config.zero.gather_quant != WireQuant::kNone;
  for (int stage = config.zero.accumulate == GradAccumulation::kSharded ? 2 : (quantized ? 1 : 0); stage <= 3;
       ++stage) {
    config.zero.stage = stage;
    config.train.global_batch = K * config.train.micro_batch * std::max<int64_t>(1, config.train.accum_steps);
    const std::string where = variant + ", K = " + std::to_string(K) + ", stage " + std::to_string(stage);
    ZDP_ASSIGN_OR_RETURN(const EngineOptions options, EngineOptions::from(config, K));
    ZDP_ASSIGN_OR_RETURN(const MemoryPlan plan, plan_memory(spec.params, options, K, DeviceKind::kCpu));
    int64_t device_before[kNumMemCategories];
    for (int c = 0; c < kNumMemCategories; ++c) {
      device_before[c] = ctx.device().memory().category(static_cast<MemCategory>(c)).current_bytes;
    }
    Engine engine(ctx, options);
    std::unique_ptr<trainer::Ops> ops;
    std::unique_ptr<trainer::Model> model;
    const int64_t other_before = ctx.device().memory().category(MemCategory::kOther).current_bytes;
    if (config.model.dtype == DType::kF32) {  // the trainer registers (the CPU's Ops compute in fp32 only)
      ZDP_ASSIGN_OR_RETURN(ops, trainer::Ops::create(ctx.device(), config.model.dtype));
      ZDP_ASSIGN_OR_RETURN(model, trainer::make_model(config, *ops));
      ZDP_RETURN_IF_ERROR(model->register_params(engine));
      const int64_t activations = ctx.device().memory().category(MemCategory::kOther).current_bytes - other_before;
      if (activations != spec.activation_bytes) {
        return Status(StatusCode::kInternal, where + ": the model took " + std::to_string(activations) +
                                                 " activation bytes, model_spec says " +
                                                 std::to_string(spec.activation_bytes));
      }
    } else {  // the same declarations straight into the engine
      for (const ParamDecl& p : spec.params) {
        ZDP_RETURN_IF_ERROR(engine.add_param(p.name, p.shape, Init::normal(0.02f), p.layer).status());
      }
    }
    ZDP_RETURN_IF_ERROR(engine.finalize());
    const MemoryReport report = engine.memory();
    if (report.params != spec.psi || report.padded_elems != plan.padded_elems) {
      return Status(StatusCode::kInternal, where + ": engine Psi " + std::to_string(report.params) + " padded " +
                                               std::to_string(report.padded_elems) + ", plan " +
                                               std::to_string(spec.psi) + " padded " + std::to_string(plan.padded_elems));
    }
    int64_t total = 0;
    for (MemCategory c : {MemCategory::kParams, MemCategory::kGrads, MemCategory::kOptimizer, MemCategory::kBuckets,
                          MemCategory::kWorkspace}) {
      const MemoryReport::Row* row = nullptr;
      for (const MemoryReport::Row& r : report.rows) {
        if (r.category == to_string(c)) row = &r;
      }
      if (row == nullptr) return Status(StatusCode::kInternal, where + ": no row " + to_string(c));
      const int64_t device_bytes =
          ctx.device().memory().category(c).current_bytes - device_before[static_cast<int>(c)];
      if (device_bytes != plan.bytes(c)) {
        return Status(StatusCode::kInternal, where + ": " + to_string(c) + ": the device accounted " +
                                                 std::to_string(device_bytes) + " bytes to the engine, planned " +
                                                 std::to_string(plan.bytes(c)));
      }
      if (row->measured != plan.bytes(c)) {
        return Status(StatusCode::kInternal, where + ": " + to_string(c) + " measured " + std::to_string(row->measured) +
                                                 " bytes, planned " + std::to_string(plan.bytes(c)) + "\n" +
                                                 report.table());
      }
      total += row->measured;
    }
    if (total != plan.total()) return Status(StatusCode::kInternal, where + ": totals differ");
  }
  return Status::Ok();
}

void expect_plan_matches(const Config& config, const std::string& variant) {
  for (int K : {1, 2, 4}) {
    EXPECT_EQ(testing::describe_failures(fork_ranks(K, [&](int rank, int world, Store& store) -> Status {
                ZDP_ASSIGN_OR_RETURN(Context ctx, make_test_context(rank, world, store));
                return check_stages(ctx, config, variant);
              })),
              "")
        << variant << ", K = " << K;
  }
}

TEST(MemoryPlan, MlpPlanEqualsTheDeviceAccountingAtEveryStageAndWorldSize) {
  expect_plan_matches(mlp_config(), "mlp");
}

TEST(MemoryPlan, GptPlanEqualsTheDeviceAccountingAtEveryStageAndWorldSize) {
  expect_plan_matches(gpt_config(), "gpt");
}

TEST(MemoryPlan, AccumulationAndABf16ReductionPlanEqualsTheDeviceAccounting) {
  Config gpt = gpt_config();
  gpt.train.accum_steps = 2;  // + the fp32 accumulation, + reduce staging at stages 2-3
  gpt.zero.prefetch_layers = 0;
  expect_plan_matches(gpt, "gpt, accum_steps 2, prefetch 0");
  gpt.zero.accumulate = GradAccumulation::kSharded;  // the fp32 shard instead, no accumulation
  expect_plan_matches(gpt, "gpt, accum_steps 2, sharded accumulation");
  Config mlp = mlp_config();
  mlp.model.dtype = DType::kBF16;  // bf16 parameters and gradients, registered without Ops
  mlp.zero.reduce_dtype = DType::kF32;
  expect_plan_matches(mlp, "mlp, bf16 compute, fp32 reduction");
  mlp.train.accum_steps = 2;  // stages 0-1: accumulated in the fp32 reduce copy, no buffer of its own
  expect_plan_matches(mlp, "mlp, bf16 compute, fp32 reduction, accum_steps 2");
}

TEST(MemoryPlan, CompressedCommunicationPlanEqualsTheDeviceAccounting) {
  // + the fp32 error feedback (grads) and the wire buffers (buckets).
  Config gpt = gpt_config();
  gpt.zero.reduce_quant = WireQuant::kInt8;
  gpt.zero.gather_quant = WireQuant::kInt8;
  expect_plan_matches(gpt, "gpt, int8 reduce and gather");
  Config mlp = mlp_config();
  mlp.zero.reduce_quant = WireQuant::kInt4;
  mlp.zero.error_feedback = false;
  expect_plan_matches(mlp, "mlp, int4 reduce without error feedback");
  // Inter-node only: the gradient wire buffers hold fp32 strides (each rank is its own
  // node in these runs, so every chunk is quantized; the buffers are sized alike).
  gpt.zero.compress = CompressScope::kInterNode;
  expect_plan_matches(gpt, "gpt, int8 reduce and gather, inter-node only");
}

TEST(MemoryPlan, SgdPlanEqualsTheDeviceAccountingOfOnlyTheStateItKeeps) {
  // SGD with momentum keeps m (its momentum buffer) and no v; without momentum neither:
  // the plan sizes them so (buffer_plan_test) and the engine allocates exactly that.
  Config sgd = mlp_config();
  sgd.optim.name = OptimizerKind::kSgd;
  sgd.optim.beta1 = 0.9;  // [optim] beta1 is SGD's momentum
  expect_plan_matches(sgd, "mlp, sgd with momentum");
  sgd.optim.beta1 = 0.0;
  expect_plan_matches(sgd, "mlp, sgd without momentum");
}

TEST(MemoryPlan, PlanExceedsTheFormulaByThePaddingOnly) {
  // 40 x 40 + 40 elements per layer do not divide into K x 32-element slices: the plan's
  // padded buffer is larger than Psi at K = 4, and its optimizer state is 12 bytes per
  // padded element / K, exactly.
  Config c = mlp_config();
  c.zero.stage = 1;
  c.train.global_batch = 4 * c.train.micro_batch;
  const trainer::ModelSpec spec = trainer::model_spec(c).value();
  EXPECT_EQ(spec.psi, 3 * (40 * 40 + 40) + 7 * 40 + 7);
  const MemoryPlan plan = plan_memory(spec.params, EngineOptions::from(c, 4).value(), 4, DeviceKind::kCpu).value();
  EXPECT_GT(plan.padded_elems, spec.psi);
  EXPECT_EQ(plan.padded_elems % (4 * 32), 0);
  EXPECT_EQ(plan.states.master + plan.states.m + plan.states.v, 12 * plan.padded_elems / 4);
  EXPECT_EQ(plan.states.params, 4 * plan.padded_elems);
  // The ZeRO formula (docs/design.md) has no padding: 4 + 4 + 12 / K bytes per parameter at stage 1, fp32.
  EXPECT_EQ(plan.formula, 4 * spec.psi + 4 * spec.psi + 12 * spec.psi / 4);
  EXPECT_LT(plan.formula, plan.states.total());
}

}  // namespace
}  // namespace zdp
