// The sharded optimizer state of one rank: the fp32 master weights and the moments the
// optimizer keeps (AdamW's m and v, SGD's momentum buffer, or none) over the owned range
// of every bucket (all of them at stage 0), the optimizer that updates them, the fp16
// loss scaler, the optimizer step count, the workspace of the gradient statistics, and
// each step's decision (kernels/step_decision.h). What checkpoints save and load, and the
// one part of the engine that step() updates.
//
// A step's outcome (skip or not, the norm, the clip coefficient) is decided on the device
// and read there by the optimizer kernels; the host learns it afterwards (settle()): at
// once on the CPU, where the decision is host memory written inline; on CUDA from a
// pinned copy made after the step, normally one step later, when it has long landed. The
// host's step count, LR schedule position and loss scale follow what it has learnt; the
// update of a step issued before the previous one was learnt gets both candidate steps
// (SliceUpdateArgs::alt_step) and the device picks.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
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
#include "kernels/step_decision.h"
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

  // Optimizer steps taken, as far as the host has learnt (exact after settle(0, ...)).
  int64_t steps() const { return steps_; }
  // The step being computed, for error messages: steps() + 1, counting unlearnt steps as taken.
  int64_t step_label() const { return steps_ + static_cast<int64_t>(pending_.size()) + 1; }
  // A load's step count. REQUIRES: settle(0, ...) first.
  void set_steps(int64_t steps) { steps_ = steps; }
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // fp16 compute only; null otherwise.
  optim::DynamicLossScale* scaler() { return scaler_ ? &*scaler_ : nullptr; }
  const optim::DynamicLossScale* scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  double lr_at_step(int64_t t) const { return optimizer_->lr_at_step(t); }

  // A step, in three calls, none of which waits on the host on CUDA:
  // 1. decide(): each bucket's reduced slice (`reduced_slice(b)`, in `dtype`) checked on
  //    the compute stream with `inv_scale` (1 / (world x accum_steps x loss_scale))
  //    folded in, one all-reduce of the statistics on the communication stream, then
  //    kernels::decide_step on the compute stream (summing in bucket order: the same on
  //    every rank). REQUIRES: settle() has left at most one step unlearnt.
  Status decide(const std::function<void*(int)>& reduced_slice, DType dtype, double inv_scale, Timeline& timeline,
                const std::string& where);
  // 2. The update of the owned range `o` of bucket `b`: the gradient `grad` (`grad_dtype`)
  //    times the decision's grad_scale into the masters and moments, the parameters
  //    written to `param_out`; nothing when the decision skips.
  Status update(int b, const OwnedRange& o, const void* grad, DType grad_dtype, void* param_out);
  // 3. After the updates: CPU, the decision is learnt now; CUDA, it is copied to pinned
  //    memory for settle().
  Status issue(const std::string& where);
  // Learns the outcome of every issued step but the last `keep` (waiting for the device
  // where it has not got there yet): the step count, the loss scale (a skipped step backs
  // it off) and last_stats(). Errors name `where`.
  Status settle(int keep, const std::string& where);
  // Whether a step's outcome is still to be learnt.
  bool unsettled() const { return !pending_.empty(); }
  // The statistics of the last step learnt; null before the first.
  const StepStats* last_stats() const { return has_last_ ? &last_ : nullptr; }

  // Collective: the fp32 master value of a whole parameter, gathered from the owning ranks.
  StatusOr<std::vector<float>> gather_master(int p, const std::string& label);

  // Adds the bytes of its buffers to `measured` (by MemCategory).
  void count_memory(int64_t* measured) const;

 private:
  OptimizerState(EngineEnv& env, const EngineOptions& options, const Layout& layout)
      : env_(env), opt_(options), layout_(layout) {}
  // The decision the kernels read: device memory on CUDA, cpu_decision_ on the CPU.
  kernels::StepDecision* decision();
  // decide() in deterministic mode: the exact sum of squares (kernels/exact_sumsq.h).
  Status decide_exact(const std::function<void*(int)>& reduced_slice, DType dtype, double inv_scale,
                      Timeline& timeline, const std::string& where);
  // One step's outcome, learnt: the count, the loss scaler and last_.
  void learn(const kernels::StepDecision& d);

  EngineEnv& env_;
  const EngineOptions& opt_;
  const Layout& layout_;
  std::optional<optim::Optimizer> optimizer_;
  std::optional<optim::DynamicLossScale> scaler_;  // fp16 only
  int64_t steps_ = 0;
  int64_t skips_in_a_row_ = 0;  // non-finite steps since the last applied one (the warning says how many)
  std::vector<int64_t> bucket_element_;  // per bucket: its first element's index among all parameter elements
  DeviceBuffer master_, exp_avg_, exp_avg_sq_;  // fp32: T (stage 0) or S
  DeviceBuffer stats_;                          // one kernels::GradStats per bucket
  DeviceBuffer check_workspace_;                // CUDA grad_check scratch
  DeviceBuffer decay_table_;                    // CUDA copy of the optimizer's decay segments
  // The step decision (CUDA: device memory and a pinned copy per unlearnt step).
  kernels::StepDecision cpu_decision_;
  DeviceBuffer decision_dev_;                    // CUDA: one kernels::StepDecision
  DeviceBuffer decision_host_;                   // CUDA: pinned, one per slot
  std::array<std::unique_ptr<Event>, 2> copied_;  // CUDA: per slot, after its pinned copy
  std::unique_ptr<Event> stats_reduced_;          // the statistics' all-reduce, on the comm stream
  std::deque<int> pending_;                       // slots of issued, unlearnt steps, oldest first
  int64_t issued_ = 0;                            // steps issued (slot = issued % 2)
  StepStats last_;
  bool has_last_ = false;
};

}  // namespace zdp
