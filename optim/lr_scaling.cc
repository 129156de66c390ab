// Batch-size learning-rate rules (see optim/lr_scaling.h).
#include "optim/lr_scaling.h"

#include <cmath>
#include <string>

namespace zdp::optim {

StatusOr<double> scale_lr(double base_lr, LrScalingRule scaling, int64_t base_batch, int64_t global_batch) {
  if (base_batch <= 0 || global_batch <= 0 || !(base_lr >= 0.0) || !std::isfinite(base_lr)) {
    return Status(StatusCode::kInvalidArgument,
                  "lr scaling (" + std::string(to_string(scaling)) + "): base_lr " + std::to_string(base_lr) +
                      ", base_batch " + std::to_string(base_batch) + ", global_batch " +
                      std::to_string(global_batch) + ": batches must be > 0 and lr finite and >= 0");
  }
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch);
  switch (scaling) {
    case LrScalingRule::kNone: return base_lr;
    case LrScalingRule::kLinear: return base_lr * ratio;
    case LrScalingRule::kSqrt: return base_lr * std::sqrt(ratio);
  }
  return Status(StatusCode::kInternal, "unknown LrScaling");
}

}  // namespace zdp::optim
