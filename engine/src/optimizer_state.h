// The sharded optimizer state of one rank: the fp32 master weights and the moments the
// optimizer keeps (AdamW's m and v, SGD's momentum buffer, or none) over the owned range
// of every bucket (all of them at stage 0), the optimizer that updates them, the fp16
// loss scaler, the optimizer step count, and the workspace of the gradient statistics.
// What checkpoints save and load, and the one part of the engine that step() updates.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/buffer_plan.h"
#include "engine/src/engine_env.h"
#include "engine/src/owned_range.h"
#include "engine/src/param_registry.h"
#include "engine/src/timeline.h"
#include "kernels/grad_check.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

namespace zdp {

class OptimizerState {
 public:
  // The optimizer (parameter groups from the registrations' decay choices and the
  // options' [optim]) and, for fp16 compute, the loss scaler. No memory yet.
  static StatusOr<std::unique_ptr<OptimizerState>> create(EngineEnv& env, const EngineOptions& options,
                                                          const Layout& layout, const ParamRegistry& registry);
  // The masters, moments, statistics, norm scratch and (CUDA) decay table, sized by
  // plan_buffers(); moments zeroed.
  Status allocate(const BufferSizes& sizes);

  float* master() { return master_.as<float>(); }
  // One state tensor the optimizer keeps besides the masters, with its checkpoint suffix.
  struct Moment {
    const char* suffix;  // kExpAvgSuffix, ...: the tensor name is the parameter's + suffix
    DeviceBuffer* buffer;
  };
  // AdamW {exp_avg: m, exp_avg_sq: v}, SGD with momentum {momentum_buffer: m}, plain SGD
  // none: what is allocated, checkpointed and counted by the ZeRO formula.
  std::vector<Moment> moments();
  std::vector<const char*> moment_suffixes() const;

  // Zeroes the masters and moments (on the compute stream): a load's starting point.
  Status clear();
  // kInvalidArgument naming `where` when a master weight this rank holds is NaN or
  // infinite (a checkpoint of a diverged run: training on would only skip every step).
  Status check_masters_finite(const std::string& where);

  int64_t steps() const { return steps_; }  // optimizer steps taken
  void set_steps(int64_t steps) { steps_ = steps; }
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // fp16 compute only; null otherwise.
  optim::DynamicLossScale* scaler() { return scaler_ ? &*scaler_ : nullptr; }
  const optim::DynamicLossScale* scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  double lr_at_step(int64_t t) const { return optimizer_->lr_at_step(t); }

  // The global gradient statistics of a step: each bucket's reduced slice
  // (`reduced_slice(b)`, in `dtype`) checked on the compute stream with `inv_scale`
  // folded in, one all-reduce, summed on the host in bucket order (the same sum on every
  // rank). Errors name `where`.
  StatusOr<optim::GradScaleDecision> grad_stats(const std::function<void*(int)>& reduced_slice, DType dtype,
                                                double inv_scale, Timeline& timeline, const std::string& where);
  // Step t of the owned range `o` of bucket `b`: the gradient `grad` (`grad_dtype`) times
  // `grad_scale` into the masters and moments, the parameters written to `param_out`.
  Status update(int b, const OwnedRange& o, const void* grad, DType grad_dtype, void* param_out, int64_t t,
                float grad_scale);
  // After a step: the loss scale learns its outcome (a skipped step backs it off), and
  // one that ran counts.
  void finish_step(optim::StepAction action);

  // Collective: the fp32 master value of a whole parameter, gathered from the owning ranks.
  StatusOr<std::vector<float>> gather_master(int p, const std::string& label);

  // Adds the bytes of its buffers to `measured` (by MemCategory).
  void count_memory(int64_t* measured) const;

 private:
  OptimizerState(EngineEnv& env, const EngineOptions& options, const Layout& layout)
      : env_(env), opt_(options), layout_(layout) {}

  EngineEnv& env_;
  const EngineOptions& opt_;
  const Layout& layout_;
  std::optional<optim::Optimizer> optimizer_;
  std::optional<optim::DynamicLossScale> scaler_;  // fp16 only
  int64_t steps_ = 0;
  std::vector<int64_t> bucket_element_;  // per bucket: its first element's index among all parameter elements
  DeviceBuffer master_, exp_avg_, exp_avg_sq_;  // fp32: T (stage 0) or S
  DeviceBuffer stats_;                          // one kernels::GradStats per bucket
  DeviceBuffer check_workspace_;                // CUDA grad_check scratch
  DeviceBuffer decay_table_;                    // CUDA copy of the optimizer's decay segments
};

}  // namespace zdp
