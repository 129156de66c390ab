// EngineOptions: from the config, and their checks.
#include "optim/clip.h"
#include "optim/lr_scaling.h"
#include "zdp/engine.h"

namespace zdp {

StatusOr<EngineOptions> EngineOptions::from(const Config& config, int world_size) {
  // validate_for_world reads a world size below 1 as "not known yet"; the options need one.
  if (world_size < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "EngineOptions::from: world_size " + std::to_string(world_size) + " is not >= 1");
  }
  ZDP_RETURN_IF_ERROR(validate_for_world(config, world_size));
  EngineOptions o;
  o.zero = config.zero;
  o.compute_dtype = config.model.dtype;
  o.accum_steps = resolved_accum_steps(config.train, world_size);
  o.optim = config.optim;
  o.total_steps = config.train.steps;
  o.global_batch = config.train.global_batch;
  o.seed = config.train.seed;
  o.trace = config.profile.enabled;
  o.deterministic = config.train.deterministic;
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
  // [zero] and [optim] are the config's sections, checked by the config's key table (one
  // range, one message per key); the compute dtype is model.dtype's.
  Config config;
  config.source = "engine options";
  config.zero = zero;
  config.optim = optim;
  config.model.dtype = compute_dtype;
  config.train.deterministic = deterministic;  // for the checks between it and [zero] (quantization)
  Status keys = validate_keys(config, {"zero.", "optim.", "model.dtype", "train.deterministic"});
  std::string problems = keys.ok() ? std::string() : keys.message();  // "engine options: zero.stage = 4 ..."
  auto bad = [&](const std::string& what) { problems += (problems.empty() ? "" : "\n") + config.source + ": " + what; };
  // What the config derives (train.accum_steps = 0 is "derived"; here it must be known).
  if (accum_steps < 1) bad("accum_steps " + std::to_string(accum_steps) + " is not >= 1");
  if (nested_layer_scopes < 0 || nested_layer_scopes > 64) {
    bad("nested_layer_scopes " + std::to_string(nested_layer_scopes) + " is not in [0, 64]");
  }
  if (optim.lr_scaling != LrScalingRule::kNone && global_batch < 1) {
    bad(std::string("lr_scaling ") + to_string(optim.lr_scaling) + " needs global_batch (the batch the lr scales to)");
  }
  const LossScaleOptions& ls = loss_scale;
  Status scaler =
      optim::DynamicLossScale::create({ls.initial, ls.growth_factor, ls.backoff, ls.growth_interval, ls.min_scale})
          .status();
  if (!scaler.ok()) bad(scaler.message());
  if (problems.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, problems);
}

}  // namespace zdp
