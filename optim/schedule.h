// Learning-rate schedules as pure functions of the step: linear warm-up, then constant,
// cosine or linear decay to a floor. Every rank computes the same value from the step
// alone, so nothing about the schedule is ever communicated or checkpointed but the step.
#pragma once

#include <cstdint>
#include <string>

#include "zdp/optim_config.h"
#include "zdp/status.h"

namespace zdp::optim {

struct Schedule {
  LrSchedule decay = LrSchedule::kConstant;  // zdp/optim_config.h
  // Steps of linear warm-up: lr(t) = peak * t / warmup_steps for t <= warmup_steps.
  int64_t warmup_steps = 0;
  // The run's length: the decay reaches the floor after step total_steps, and stays there
  // (a run of that many steps ends just above it). Ignored by kConstant; must exceed
  // warmup_steps otherwise.
  int64_t total_steps = 0;
  // The floor as a fraction of the peak (0 decays to zero; 0.1 to a tenth of the peak).
  double final_lr_ratio = 0.0;

  // kInvalidArgument naming the field and its value when inconsistent.
  Status validate() const;
};

// The learning rate of optimizer step t (counted from 1, like AdamW's bias correction t):
//   t <= W:       peak * t / W                                       (W = warmup_steps)
//   W < t <= T:   floor + (peak - floor) * f(progress),  progress = (t - 1 - W) / (T - W)
//                 cosine: f = (1 + cos(pi * progress)) / 2;  linear: f = 1 - progress
//   t > T:        floor                                              (T = total_steps)
// with floor = final_lr_ratio * peak; kConstant is the peak after warm-up. This is llm.c's
// get_lr (train_gpt2.cu) at its 0-based step t - 1: warm-up (s + 1) / W, then decay
// (s - W) / (T - W); the decay is also HF's get_cosine_schedule_with_warmup's.
// REQUIRES: schedule.validate() is OK and t >= 1.
double lr_at(const Schedule& schedule, double peak_lr, int64_t t);

}  // namespace zdp::optim
