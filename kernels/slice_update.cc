// The argument check shared by the fused optimizer updates (see kernels/slice_update.h).
#include "kernels/slice_update.h"

#include <cmath>

namespace zdp::kernels {
namespace {

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace

Status check_slice_update(const SliceUpdateArgs& a, const char* op) {
  auto invalid = [op](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, std::string(op) + ": " + what);
  };
  if (a.count < 0) return invalid("count " + std::to_string(a.count) + " < 0");
  if (a.global_offset < 0) return invalid("global_offset " + std::to_string(a.global_offset) + " < 0");
  if (a.count > 0 && (!a.master || !a.grad)) {
    return invalid("master and grad must be non-null for " + std::to_string(a.count) + " elements");
  }
  if (!is_float_dtype(a.grad_dtype)) {
    return invalid(std::string("grad dtype ") + to_string(a.grad_dtype) + " is not fp32, bf16 or fp16");
  }
  if (a.param_out && !is_float_dtype(a.param_dtype)) {
    return invalid(std::string("param dtype ") + to_string(a.param_dtype) + " is not fp32, bf16 or fp16");
  }
  if (a.rounding == Rounding::kStochastic &&
      (!a.param_out || (a.param_dtype != DType::kBF16 && a.param_dtype != DType::kF16))) {
    return invalid("stochastic rounding needs a bf16 or fp16 param_out");
  }
  if (a.step < 1) return invalid("step " + std::to_string(a.step) + " < 1 (steps count from 1)");
  if (!std::isfinite(a.lr) || !std::isfinite(a.weight_decay) || !std::isfinite(a.grad_scale)) {
    return invalid("lr (" + std::to_string(a.lr) + "), weight_decay (" + std::to_string(a.weight_decay) +
                   ") and grad_scale (" + std::to_string(a.grad_scale) + ") must be finite");
  }
  if (a.num_segments < 0 || (a.num_segments > 0 && !a.segments)) return invalid("segments null or num_segments < 0");
  if (a.decision != nullptr && (a.alt_step < 1 || !std::isfinite(a.alt_lr))) {
    return invalid("alt_step " + std::to_string(a.alt_step) + " < 1 or alt_lr " + std::to_string(a.alt_lr) +
                   " not finite (needed with a device decision)");
  }
  return Status::Ok();
}

}  // namespace zdp::kernels
