// make_profiler() and the ZDP_PROFILE_TEST_DELAY test hook (profiling.h).
#include "trainer/loop/profiling.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/internal/key_value_list.h"
#include "kernels/gemm.h"
#include "trainer/models/model_spec.h"
#include "zdp/memory_plan.h"

namespace zdp::trainer {

std::unique_ptr<Profiler> make_profiler(Context& ctx, Engine& engine, const Config& config, const Model& model,
                                        double peak_flops, int64_t first_step, std::FILE* out) {
  ProfileOptions o = ProfileOptions::from(config);
  o.samples_per_step = config.train.global_batch;
  o.tokens_per_sample = model.tokens_per_sample();
  o.flops_per_sample = model.flops_per_sample();
  if (o.peak_flops <= 0) o.peak_flops = peak_flops;
  o.description = model.describe() + ", " + to_string(config.model.dtype);
  o.out = out;
  o.first_step = first_step;
  // "Planned" is what `dp-launch plan` prints: plan_memory over the model's own parameter
  // list at each stage, the model's activation buffers, and on GPUs the GEMM workspace
  // that Ops takes and fused attention's (estimated) cuDNN workspace.
  StatusOr<ModelSpec> spec = model_spec(config);
  // The plan assumes a GPU runs 16-bit attention fused; where this build or GPU fell back
  // to the batched path (or the other way), the model's own buffers are the plan's.
  if (spec.ok() && spec->fused_attention != model.fused_attention()) {
    spec->activation_bytes = model.activation_bytes();
    spec->attention_workspace_bytes = model.fused_attention() ? fused_attention_workspace_bytes(config) : 0;
  }
  if (spec.ok()) {
    o.plan_source = "dp-launch plan";
    o.plan = [spec = *spec, options = engine.options(), world = ctx.world_size(),
              device = ctx.device().kind()](int stage) -> StatusOr<MemoryByCategory> {
      EngineOptions at_stage = options;
      at_stage.zero.stage = stage;
      ZDP_ASSIGN_OR_RETURN(const MemoryPlan plan, plan_memory(spec.params, at_stage, world, device));
      MemoryByCategory bytes;
      for (int c = 0; c < kNumMemCategories; ++c) bytes[static_cast<size_t>(c)] = plan.bytes(static_cast<MemCategory>(c));
      bytes[static_cast<size_t>(MemCategory::kOther)] = spec.activation_bytes;
      if (device == DeviceKind::kCuda) {
        bytes[static_cast<size_t>(MemCategory::kWorkspace)] += kernels::kGemmWorkspaceBytes + spec.attention_workspace_bytes;
      }
      return bytes;
    };
  }
  return std::make_unique<Profiler>(ctx, engine, std::move(o));
}

StatusOr<std::chrono::milliseconds> profile_test_delay(int rank) {
  const char* value = std::getenv("ZDP_PROFILE_TEST_DELAY");
  if (value == nullptr || *value == '\0') return std::chrono::milliseconds(0);
  const std::string text = value;
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, "ZDP_PROFILE_TEST_DELAY='" + text + "': " + why +
                                                    " (expected rank=R,ms=M; a test hook: unset it outside tests)");
  };
  StatusOr<std::vector<KeyValue>> items = split_key_values(text);
  if (!items.ok()) return bad(items.status().message());
  int64_t target = -1, ms = -1;
  for (const KeyValue& item : *items) {
    if (item.key != "rank" && item.key != "ms") return bad("unknown key '" + item.key + "'");
    const StatusOr<int64_t> v = integer_value(item, 0, item.key == "rank" ? INT32_MAX : kMaxHookPauseMs);
    if (!v.ok()) return bad(v.status().message());
    (item.key == "rank" ? target : ms) = *v;
  }
  if (target < 0 || ms < 0) return bad("rank and ms are required");
  if (target != rank) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(ms);
}

}  // namespace zdp::trainer
