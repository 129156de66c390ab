// Global-norm gradient clipping and loss scaling: from the all-reduced GradStats of every
// rank's slice to the one factor the fused optimizer multiplies each gradient by, and
// whether to take the step at all (fp16 overflow).
#pragma once

#include <cstdint>

#include "kernels/grad_check.h"
#include "kernels/step_decision.h"
#include "zdp/status.h"

namespace zdp::optim {

// PyTorch's clip_grad_norm_: min(1, max_norm / (total_norm + 1e-6)). max_norm <= 0
// disables clipping (1). A non-finite norm gives 0 (the step should be skipped anyway).
double clip_coefficient(double total_norm, double max_norm);

enum class StepAction : uint8_t {
  kApply = 0,       // gradients are finite: run the optimizer with grad_scale
  kSkipNonFinite,   // an inf/NaN somewhere (fp16 overflow): skip, and back off the loss scale
};
const char* to_string(StepAction action);

struct GradScaleDecision {
  StepAction action = StepAction::kApply;
  double grad_norm = 0.0;  // of the unscaled gradient (what a user logs)
  double clip_coef = 1.0;
  // For the optimizer kernel: clip_coef / loss_scale, applied to the stored gradient.
  float grad_scale = 1.0f;
};

// `global` is the sum over ranks of grad_check results taken at scale 1 on the stored
// (loss-scaled) gradients; `loss_scale` is 1 without loss scaling.
// REQUIRES: loss_scale > 0.
GradScaleDecision decide_grad_scale(const kernels::GradStats& global, double loss_scale, double max_norm);

// Dynamic loss scaling for fp16 (torch.cuda.amp.GradScaler's rule): after an overflow the
// scale is multiplied by backoff_factor; after growth_interval finite steps in a row, by
// growth_factor.
class DynamicLossScale {
 public:
  struct Options {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
    double min_scale = 1.0;  // never backs off below this (a floor PyTorch does not have); <= init_scale
  };
  static StatusOr<DynamicLossScale> create(const Options& options);

  double scale() const { return scale_; }
  // Records the outcome of one step and adjusts the scale.
  void update(StepAction action);
  // Finite steps since the scale last changed (it grows when this reaches growth_interval).
  int64_t finite_steps() const { return finite_steps_; }
  // Resumes from a checkpoint: the scale and finite_steps() it had when saved, the scale
  // raised to min_scale if below it. kInvalidArgument for a scale that is not finite and
  // > 0 or a negative step count.
  Status restore(double scale, int64_t finite_steps);

 private:
  explicit DynamicLossScale(const Options& options) : options_(options), scale_(options.init_scale) {}
  Options options_;
  double scale_;
  int64_t finite_steps_ = 0;
};

}  // namespace zdp::optim
