// The step decision and the loss sum on the CPU (kernels/step_decision.h, kernels/loss_sum.h).
#include <string>

#include "kernels/loss_sum.h"
#include "kernels/step_decision.h"

namespace zdp::kernels {

Status check_step_decision(const StepDecisionArgs& a) {
  if (a.out == nullptr || a.buckets < 0 || (a.buckets > 0 && a.stats == nullptr) || a.exact_records < 0 ||
      (a.exact_records > 0 && a.exact == nullptr)) {
    return Status(StatusCode::kInvalidArgument, "decide_step: null output or statistics, or " +
                                                    std::to_string(a.buckets) + " buckets");
  }
  if (!(a.inv_scale > 0.0) || !is_finite_double(a.inv_scale) || !is_finite_double(a.max_norm)) {
    return Status(StatusCode::kInvalidArgument, "decide_step: inv_scale " + std::to_string(a.inv_scale) +
                                                    " must be finite and > 0, max_norm finite");
  }
  return Status::Ok();
}

Status decide_step_cpu(const StepDecisionArgs& a) {
  ZDP_RETURN_IF_ERROR(check_step_decision(a));
  decide_step(a);
  return Status::Ok();
}

Status check_loss_sum(const LossSumArgs& a) {
  if (a.losses == nullptr || a.sum == nullptr || a.count < 1 || !(a.divide_by > 0.0)) {
    return Status(StatusCode::kInvalidArgument, "loss_sum: needs losses, a sum, count >= 1 (got " +
                                                    std::to_string(a.count) + ") and divide_by > 0");
  }
  return Status::Ok();
}

Status loss_sum_cpu(const LossSumArgs& a) {
  ZDP_RETURN_IF_ERROR(check_loss_sum(a));
  double sum = 0;
  for (int64_t i = 0; i < a.count; ++i) sum += a.losses[i];
  *a.sum = (a.first ? 0.0 : *a.sum) + sum / static_cast<double>(a.count) / a.divide_by;
  if (a.rounded != nullptr) *a.rounded = static_cast<float>(*a.sum);
  return Status::Ok();
}

}  // namespace zdp::kernels
