// What every fused optimizer update over one slice of the flat parameter buffer takes besides
// its own state and hyper-parameters (AdamWArgs and SgdArgs derive from it): the slice, the
// fp32 master weights, the gradient, the compute-dtype output and its rounding, the step, lr,
// weight decay (default and segment table) and the gradient scale. Also the argument check
// and the gradient/output type dispatch that the CPU and CUDA launchers of every optimizer share.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common.h"
#include "kernels/step_decision.h"

namespace zdp::kernels {

struct SliceUpdateArgs {
  // The slice: `count` elements starting at global element `global_offset` of the flat
  // buffer (the index that keys stochastic rounding and the decay table).
  int64_t count = 0;
  int64_t global_offset = 0;
  float* master = nullptr;  // fp32 master weights, updated in place
  const void* grad = nullptr;
  DType grad_dtype = DType::kF32;  // fp32, bf16 or fp16
  // The updated parameter in the compute dtype (fp32, bf16 or fp16); nullptr writes none.
  void* param_out = nullptr;
  DType param_dtype = DType::kBF16;
  Rounding rounding = Rounding::kNearest;  // kStochastic needs param_dtype bf16 or fp16
  uint64_t seed = 0;                       // stochastic rounding key (same on every rank)

  // Hyper-parameters of this step (the schedule and batch scaling are applied by optim/).
  int64_t step = 1;  // t, counted from 1
  float lr = 1e-3f;
  float weight_decay = 0.0f;  // for elements outside every segment
  // Multiplies the gradient before anything else: 1 / loss_scale x clip coefficient.
  float grad_scale = 1.0f;
  // Sorted, disjoint segments of global indices with their own weight decay (host
  // memory for the CPU launcher, device memory for the CUDA launcher); may be empty.
  // The CPU launcher checks the table; the CUDA one cannot read it, so upload a table
  // that validate_segments() accepted (optim::Optimizer's is).
  const DecaySegment* segments = nullptr;
  int64_t num_segments = 0;

  // The step's outcome, decided on the device (kernels/step_decision.h; host memory for
  // the CPU launcher, device memory for the CUDA one), or null: then grad_scale, step and
  // lr above apply as given. When set, the update reads it when it runs: a skip leaves
  // everything untouched, its grad_scale replaces grad_scale, and when its prev_skip is
  // set, alt_step and alt_lr replace step and lr. (The engine issues a step before the
  // host has learnt whether the previous one was skipped, which would leave the step
  // count one lower: it passes both candidates and the device picks.)
  const StepDecision* decision = nullptr;
  int64_t alt_step = 1;
  float alt_lr = 0.0f;
};

// The arguments the update runs with once `decision` is read, on the host: false when the
// decision skips the step (nothing to do). REQUIRES: a.decision in host memory (or null).
inline bool resolve_decision(SliceUpdateArgs& a) {
  if (a.decision == nullptr) return true;
  const StepDecision d = *a.decision;
  a.decision = nullptr;
  if (d.skip != 0) return false;
  a.grad_scale = d.grad_scale;
  if (d.prev_skip != 0) {
    a.step = a.alt_step;
    a.lr = a.alt_lr;
  }
  return true;
}

// `a` with the alternative step and lr (what the update uses when the decision's
// prev_skip is set): for launchers that derive per-step scalars on the host.
template <typename Args>
Args with_alternative_step(Args a) {
  a.step = a.alt_step;
  a.lr = a.alt_lr;
  return a;
}

// Checks the shared fields (ranges, dtypes, null master/grad, step >= 1, finite lr,
// weight_decay and grad_scale, the table pointer; with a decision, alt_step >= 1 and a
// finite alt_lr); messages start with "<op>: ".
Status check_slice_update(const SliceUpdateArgs& args, const char* op);

// Calls fn(G{}, P{}) with the storage types of the gradient and of the output (NoOutput
// when param_out is null); kInvalidArgument naming "<op> grad" or "<op> param" otherwise.
template <typename Fn>
Status dispatch_update_types(const SliceUpdateArgs& a, const char* op, Fn&& fn) {
  const std::string grad_what = std::string(op) + " grad", param_what = std::string(op) + " param";
  return dispatch_float(a.grad_dtype, grad_what.c_str(), [&](auto g) -> Status {
    if (!a.param_out) return fn(g, NoOutput{});
    return dispatch_float(a.param_dtype, param_what.c_str(), [&](auto p) -> Status { return fn(g, p); });
  });
}

}  // namespace zdp::kernels
