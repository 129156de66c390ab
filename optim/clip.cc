// Global-norm clipping and loss scaling (see optim/clip.h).
#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace zdp::optim {

double clip_coefficient(double total_norm, double max_norm) {
  return kernels::clip_coefficient(total_norm, max_norm);  // one definition: the engine's step decision uses it too
}

const char* to_string(StepAction action) {
  return action == StepAction::kApply ? "apply" : "skip (non-finite gradients)";
}

GradScaleDecision decide_grad_scale(const kernels::GradStats& global, double loss_scale, double max_norm) {
  GradScaleDecision d;
  d.grad_norm = std::sqrt(static_cast<double>(global.sum_sq)) / loss_scale;
  if (global.nonfinite > 0.0f || !std::isfinite(d.grad_norm)) {
    d.action = StepAction::kSkipNonFinite;
    d.clip_coef = 0.0;
    d.grad_scale = 0.0f;
    return d;
  }
  d.clip_coef = clip_coefficient(d.grad_norm, max_norm);
  d.grad_scale = static_cast<float>(d.clip_coef / loss_scale);
  return d;
}

StatusOr<DynamicLossScale> DynamicLossScale::create(const Options& o) {
  // Finite factors and a floor at or below the start: an infinite growth made the scale
  // infinite (every later step failed at decide_step), and a floor above init_scale made
  // the first "back-off" raise the scale to it (every later step skipped, no warning).
  if (!(o.init_scale > 0.0) || !(o.growth_factor >= 1.0) || !(o.backoff_factor > 0.0 && o.backoff_factor < 1.0) ||
      o.growth_interval < 1 || !(o.min_scale > 0.0) || !std::isfinite(o.init_scale) ||
      !std::isfinite(o.growth_factor) || !(o.min_scale <= o.init_scale)) {
    return Status(StatusCode::kInvalidArgument,
                  "loss scale: init_scale " + std::to_string(o.init_scale) + ", growth_factor " +
                      std::to_string(o.growth_factor) + ", backoff_factor " + std::to_string(o.backoff_factor) +
                      ", growth_interval " + std::to_string(o.growth_interval) + ", min_scale " +
                      std::to_string(o.min_scale) +
                      ": need finite init > 0, finite growth >= 1, 0 < backoff < 1, interval >= 1, 0 < min <= init");
  }
  return DynamicLossScale(o);
}

void DynamicLossScale::update(StepAction action) {
  if (action == StepAction::kSkipNonFinite) {
    scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    finite_steps_ = 0;
    return;
  }
  if (++finite_steps_ >= options_.growth_interval) {
    // As PyTorch's GradScaler: a growth past the largest double keeps the scale.
    if (std::isfinite(scale_ * options_.growth_factor)) scale_ *= options_.growth_factor;
    finite_steps_ = 0;
  }
}

Status DynamicLossScale::restore(double scale, int64_t finite_steps) {
  if (!(scale > 0) || !std::isfinite(scale) || finite_steps < 0) {
    return Status(StatusCode::kInvalidArgument, "loss scale state: scale " + std::to_string(scale) +
                                                    ", finite steps " + std::to_string(finite_steps) +
                                                    " (need a finite scale > 0 and steps >= 0)");
  }
  // Never below this run's floor (a checkpoint of a run with a lower min_scale): the next
  // back-off would raise it to the floor at once.
  scale_ = std::max(scale, options_.min_scale);
  finite_steps_ = finite_steps;
  return Status::Ok();
}

}  // namespace zdp::optim
