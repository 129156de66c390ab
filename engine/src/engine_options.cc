// EngineOptions: from the config, and their checks.
#include <cmath>

#include "optim/clip.h"
#include "optim/lr_scaling.h"
#include "zdp/engine.h"

namespace zdp {

StatusOr<EngineOptions> EngineOptions::from(const Config& config, int world_size) {
  ZDP_RETURN_IF_ERROR(validate_for_world(config, world_size));
  EngineOptions o;
  o.stage = config.zero.stage;
  o.bucket_mb = config.zero.bucket_mb;
  o.compute_dtype = config.model.dtype;
  o.reduce_dtype = config.zero.reduce_dtype;
  o.overlap = config.zero.overlap;
  o.prefetch_layers = config.zero.prefetch_layers;
  o.accumulate = config.zero.accumulate;
  o.accum_steps = resolved_accum_steps(config.train, world_size);
  o.optim = config.optim;
  o.total_steps = config.train.steps;
  o.global_batch = config.train.global_batch;
  o.seed = config.train.seed;
  o.trace = config.profile.enabled;
  // The batch-size rule is applied here, once: the options carry the scaled lr and min_lr
  // and no rule, so code that reads o.optim.lr sees the rate the run uses.
  if (o.optim.lr_scaling != LrScalingRule::kNone) {
    const int64_t base = o.optim.base_batch > 0 ? o.optim.base_batch : o.global_batch;
    StatusOr<double> lr = optim::scale_lr(o.optim.lr, o.optim.lr_scaling, base, o.global_batch);
    StatusOr<double> min_lr = optim::scale_lr(o.optim.min_lr, o.optim.lr_scaling, base, o.global_batch);
    if (!lr.ok() || !min_lr.ok()) return (lr.ok() ? min_lr.status() : lr.status()).with_context(config.source);
    o.optim.lr = *lr;
    o.optim.min_lr = *min_lr;
    o.optim.lr_scaling = LrScalingRule::kNone;
    o.optim.base_batch = 0;
  }
  Status s = o.validate();
  if (!s.ok()) return s.with_context(config.source);
  return o;
}

Status EngineOptions::validate() const {
  std::string problems;
  auto bad = [&](const std::string& what) { problems += (problems.empty() ? "" : "\n") + what; };
  if (stage < 0 || stage > 3) bad("stage " + std::to_string(stage) + " is not one of 0, 1, 2, 3");
  if (!(bucket_mb > 0) || !std::isfinite(bucket_mb)) bad("bucket_mb " + std::to_string(bucket_mb) + " is not > 0");
  if (compute_dtype != DType::kF32 && compute_dtype != DType::kBF16 && compute_dtype != DType::kF16) {
    bad(std::string("compute dtype ") + to_string(compute_dtype) + " is not fp32, bf16 or fp16");
  }
  if (reduce_dtype != DType::kF32 && reduce_dtype != DType::kBF16) {
    bad(std::string("reduce dtype ") + to_string(reduce_dtype) + " is not fp32 or bf16");
  }
  if (accum_steps < 1) bad("accum_steps " + std::to_string(accum_steps) + " is not >= 1");
  if (prefetch_layers < 0) bad("prefetch_layers " + std::to_string(prefetch_layers) + " is not >= 0");
  if (accumulate == GradAccumulation::kSharded && !shards_grads()) {
    bad("accumulate sharded needs stage 2 or 3 (the gradient shard it accumulates into); stage is " +
        std::to_string(stage));
  }
  if (!(optim.grad_clip >= 0)) bad("grad_clip " + std::to_string(optim.grad_clip) + " is not >= 0");
  if (optim.lr_scaling != LrScalingRule::kNone && global_batch < 1) {
    bad(std::string("lr_scaling ") + to_string(optim.lr_scaling) + " needs global_batch (the batch the lr scales to)");
  }
  const LossScaleOptions& ls = loss_scale;
  Status scaler = optim::DynamicLossScale::create(
                      {ls.initial, ls.growth_factor, ls.backoff, ls.growth_interval, ls.min_scale})
                      .status();
  if (!scaler.ok()) bad(scaler.message());
  if (problems.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, "engine options: " + problems);
}

}  // namespace zdp
