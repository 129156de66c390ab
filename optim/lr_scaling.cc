// Batch-size learning-rate rules (see optim/lr_scaling.h).
#include "optim/lr_scaling.h"

#include <cmath>
#include <string>

namespace zdp::optim {

const char* to_string(LrScaling scaling) {
  switch (scaling) {
    case LrScaling::kNone: return "none";
    case LrScaling::kLinear: return "linear";
    case LrScaling::kSqrt: return "sqrt";
  }
  return "?";
}

StatusOr<LrScaling> parse_lr_scaling(std::string_view text) {
  for (LrScaling s : {LrScaling::kNone, LrScaling::kLinear, LrScaling::kSqrt}) {
    if (text == to_string(s)) return s;
  }
  return Status(StatusCode::kInvalidArgument,
                "lr_scaling \"" + std::string(text) + "\" is not one of none, linear, sqrt");
}

StatusOr<double> scale_lr(double base_lr, LrScaling scaling, int64_t base_batch, int64_t global_batch) {
  if (base_batch <= 0 || global_batch <= 0 || !(base_lr >= 0.0) || !std::isfinite(base_lr)) {
    return Status(StatusCode::kInvalidArgument,
                  "lr scaling (" + std::string(to_string(scaling)) + "): base_lr " + std::to_string(base_lr) +
                      ", base_batch " + std::to_string(base_batch) + ", global_batch " +
                      std::to_string(global_batch) + ": batches must be > 0 and lr finite and >= 0");
  }
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch);
  switch (scaling) {
    case LrScaling::kNone: return base_lr;
    case LrScaling::kLinear: return base_lr * ratio;
    case LrScaling::kSqrt: return base_lr * std::sqrt(ratio);
  }
  return Status(StatusCode::kInternal, "unknown LrScaling");
}

}  // namespace zdp::optim
