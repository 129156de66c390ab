// KernelProfile (kernel_profile.h): which steps are timed, kernels.json and the table.
#include "trainer/loop/kernel_profile.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/internal/output_file.h"
#include "trainer/models/model_spec.h"
#include "zdp/memory_plan.h"
#include "zdp/profiler.h"

namespace zdp::trainer {

StatusOr<std::unique_ptr<KernelProfile>> KernelProfile::create(Context& ctx, Engine& engine, Ops& ops,
                                                               const Config& config, const Model& model,
                                                               int64_t first_step) {
  if (!config.profile.enabled || ctx.rank() != 0) return std::unique_ptr<KernelProfile>();
  if (!config.profile.kernels) {
    // An earlier run's kernel times must not pass for this run's beside its profile.jsonl
    // (plan --from-profile read the two together).
    std::error_code ignored;
    std::filesystem::remove(std::filesystem::path(ProfileOptions::from(config).dir) / "kernels.json", ignored);
    return std::unique_ptr<KernelProfile>();
  }
  ZDP_ASSIGN_OR_RETURN(std::unique_ptr<KernelTimer> timer, KernelTimer::create(ctx.device(), engine.compute_stream()));
  return std::unique_ptr<KernelProfile>(new KernelProfile(engine, ops, config, model, first_step, std::move(timer)));
}

KernelProfile::KernelProfile(Engine& engine, Ops& ops, const Config& config, const Model& model, int64_t first_step,
                             std::unique_ptr<KernelTimer> timer)
    : engine_(engine), ops_(ops), config_(config), model_(model), first_step_(first_step), timer_(std::move(timer)) {
  ops_.set_kernel_timer(timer_.get());
}

KernelProfile::~KernelProfile() { ops_.set_kernel_timer(nullptr); }

void KernelProfile::begin_step(int64_t step) {
  // The profiler's measured steps (zdp::Profiler): counted from the run's first step.
  const int64_t i = step - first_step_;
  const ProfileConfig& p = config_.profile;
  armed_ = i >= p.warmup_steps && (p.active_steps <= 0 || i < p.warmup_steps + p.active_steps);
  if (armed_) timer_->arm();
}

void KernelProfile::end_step() {
  if (armed_) timer_->disarm();
  armed_ = false;
  timer_->collect();
}

Status KernelProfile::finish(std::FILE* out) {
  // Past the collective timeout, as every host wait (engine/src/exec.h).
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(config_.launch.collective_timeout_s * 1000)) +
                    std::chrono::seconds(30);
  ZDP_RETURN_IF_ERROR(engine_.compute_stream().synchronize(wait));
  const RegionTimes& t = timer_->times();
  const ModelConfig& m = config_.model;
  const ProfileOptions where = ProfileOptions::from(config_);
  if (t.steps == 0) {
    // A resumed run with no step past the warm-up: an empty kernels.json replaced the
    // earlier run's, and plan --from-profile refused it.
    if (out != nullptr) {
      std::fprintf(out, "kernels: no step measured (profile.warmup_steps leaves none of this run's); %s/kernels.json "
                        "is left as it was\n", where.dir.c_str());
    }
    return Status::Ok();
  }
  const double steps = static_cast<double>(std::max<int64_t>(1, t.steps));
  nlohmann::json regions = nlohmann::json::array();
  for (int r = 0; r < kNumKernelRegions; ++r) {
    const auto i = static_cast<size_t>(r);
    if (t.entries[i] == 0) continue;
    regions.push_back({{"name", region_name(static_cast<KernelRegion>(r))},
                       {"entries_per_step", static_cast<double>(t.entries[i]) / steps},
                       {"ms_per_step", t.seconds[i] * 1e3 / steps}});
  }
  Device& device = engine_.compute_stream().device();
  // The buckets the engine laid out for this rank (plan_memory builds the engine's layout),
  // which the planner's engine rows are priced on.
  const EngineOptions& eo = engine_.options();
  ZDP_ASSIGN_OR_RETURN(const ModelSpec spec, model_spec(config_));
  ZDP_ASSIGN_OR_RETURN(const MemoryPlan layout, plan_memory(spec.params, eo, engine_.world_size(), device.kind()));
  const nlohmann::json doc = {
      {"format", kKernelTimesFormat},
      {"version", kKernelTimesVersion},
      {"rank", 0},
      {"device", device.name()},
      {"device_kind", to_string(device.kind())},
      {"world_size", engine_.world_size()},
      {"zero_stage", engine_.options().zero.stage},
      {"model",
       {{"layers", m.n_layers},
        {"d_model", m.d_model},
        {"heads", m.n_heads},
        {"vocab", m.vocab_size},
        {"seq", m.seq_len},
        {"micro_batch", config_.train.micro_batch},
        {"accum_steps", engine_.accum_steps()},
        {"dtype", to_string(m.dtype)},
        {"fused_attention", model_.fused_attention()},
        {"dgelu_epilogue", ops_.chose_dgelu_epilogue()}}},
      {"engine",
       {{"deterministic", eo.deterministic},
        {"reduce_dtype", to_string(eo.zero.reduce_dtype)},
        {"sharded_accumulation", eo.zero.accumulate == GradAccumulation::kSharded},
        {"buckets", layout.bucket_elems}}},
      {"steps", t.steps},
      {"regions", regions}};
  const std::string path = where.dir + "/kernels.json";
  ZDP_RETURN_IF_ERROR(write_file_atomically(path, doc.dump(1) + "\n", "kernel times"));
  if (out == nullptr) return Status::Ok();
  double total = 0;
  for (double s : t.seconds) total += s;
  std::fprintf(out, "kernels (rank 0, profile.kernels; mean over %lld measured steps; %s):\n",
               static_cast<long long>(t.steps), path.c_str());
  std::fprintf(out, "  %-38s %9s %9s %6s\n", "region", "per step", "ms/step", "share");
  for (int r = 0; r < kNumKernelRegions; ++r) {
    const auto i = static_cast<size_t>(r);
    if (t.entries[i] == 0) continue;
    std::fprintf(out, "  %-38s %9.1f %9.3f %5.1f%%\n", region_name(static_cast<KernelRegion>(r)),
                 static_cast<double>(t.entries[i]) / steps, t.seconds[i] * 1e3 / steps,
                 total > 0 ? 100 * t.seconds[i] / total : 0.0);
  }
  // A CPU run has no GPU step model to meet: it compares with another CPU run's profile.
  const bool gpu = device.kind() == DeviceKind::kCuda;
  std::fprintf(out, "  %-38s %9s %9.3f  (compare: dp-launch plan CONFIG %s--from-profile %s%s)\n", "all regions", "",
               total * 1e3 / steps, gpu ? "--gpu NAME " : "", where.dir.c_str(), gpu ? "" : " --baseline DIR0");
  std::fflush(out);
  return Status::Ok();
}

}  // namespace zdp::trainer
