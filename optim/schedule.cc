// Learning-rate schedules (see optim/schedule.h for the formulas).
#include "optim/schedule.h"

#include <cmath>
#include <string>

namespace zdp::optim {

Status Schedule::validate() const {
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "lr schedule: " + what); };
  if (warmup_steps < 0) return invalid("warmup_steps = " + std::to_string(warmup_steps) + " < 0");
  if (!(final_lr_ratio >= 0.0 && final_lr_ratio <= 1.0)) {
    return invalid("final_lr_ratio = " + std::to_string(final_lr_ratio) + " is not in [0, 1]");
  }
  if (decay != LrSchedule::kConstant && total_steps <= warmup_steps) {
    return invalid(std::string(to_string(decay)) + " decay needs total_steps (" + std::to_string(total_steps) +
                   ") > warmup_steps (" + std::to_string(warmup_steps) + ")");
  }
  return Status::Ok();
}

double lr_at(const Schedule& s, double peak_lr, int64_t t) {
  if (t <= s.warmup_steps) return peak_lr * static_cast<double>(t) / static_cast<double>(s.warmup_steps);
  if (s.decay == LrSchedule::kConstant) return peak_lr;
  const double floor = s.final_lr_ratio * peak_lr;
  // Progress counts the steps decayed before this one, as llm.c's (step - W) / (T - W) of
  // its 0-based step and HF's get_cosine_schedule_with_warmup do: the first step after the
  // warm-up is at the peak, and the last step of a run of T, (T - 1 - W) / (T - W) of the
  // way, is not yet at the floor. (Progress t - W made every run's last step the floor: 0
  // by default, a step that changed nothing.)
  if (t - 1 >= s.total_steps) return floor;
  const double progress =
      static_cast<double>(t - 1 - s.warmup_steps) / static_cast<double>(s.total_steps - s.warmup_steps);
  const double pi = std::acos(-1.0);
  const double f = s.decay == LrSchedule::kCosine ? 0.5 * (1.0 + std::cos(pi * progress)) : 1.0 - progress;
  return floor + (peak_lr - floor) * f;
}

}  // namespace zdp::optim
