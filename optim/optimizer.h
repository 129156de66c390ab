// The sharded optimizer of one rank: hyper-parameters, the LR schedule, the batch-size rule
// and the parameter groups, turned into one fused-kernel call per owned slice and step.
// No device or communication code: the engine owns the buffers and the stream, reduces the
// gradients and gathers the parameters; this decides what each element's update is.
//
// AdamW (torch.optim.AdamW; t = step >= 1, g = stored gradient * grad_scale):
//   p -= lr_t * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t);  p -= lr_t * mhat / (sqrt(vhat) + eps)
// SGD (torch.optim.SGD): see kernels/sgd.h.
// lr_t = lr_at(schedule, scale_lr(lr, lr_scaling, base_batch, global_batch), t);
// wd per parameter from the groups (decoupled for AdamW, coupled for SGD, as PyTorch).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/sgd.h"
#include "optim/lr_scaling.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "zdp/device_kind.h"

namespace zdp::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct SgdConfig {
  double momentum = 0.0;
  double dampening = 0.0;
  kernels::SgdMomentum kind = kernels::SgdMomentum::kClassic;
};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-3;             // the peak learning rate, tuned at base_batch
  double weight_decay = 0.0;    // of parameters that no group rule matches
  std::vector<ParamGroupRule> groups;  // e.g. {no_decay_for_biases_and_norms()}
  AdamWConfig adamw;
  SgdConfig sgd;
  Schedule schedule;
  LrScalingRule lr_scaling = LrScalingRule::kNone;
  int64_t base_batch = 1;
  int64_t global_batch = 1;     // world_size x micro_batch x accum_steps
  // How the compute-dtype parameter copy is rounded; stochastic needs bf16 or fp16.
  kernels::Rounding rounding = kernels::Rounding::kNearest;
  uint64_t seed = 0;            // stochastic rounding stream (same on every rank)
};

// One contiguous slice a rank owns: its optimizer state and this step's reduced gradient.
// Pointers are device memory on CUDA, host memory on the CPU.
struct SliceState {
  int64_t count = 0;
  int64_t global_offset = 0;  // index of the first element in the flat parameter buffer
  float* master = nullptr;
  float* m = nullptr;         // AdamW first moment / SGD momentum buffer (null: momentum 0)
  float* v = nullptr;         // AdamW second moment (unused by SGD)
  const void* grad = nullptr;
  DType grad_dtype = DType::kF32;
  void* param_out = nullptr;  // compute-dtype copy (the all-gather's send buffer) or null
  DType param_dtype = DType::kBF16;
  // The step's outcome on the device (kernels/step_decision.h), or null (then grad_scale
  // applies and the step is taken). With one, `alt_step` (0: t) is the step the update
  // uses instead of t when the decision says the previous step was skipped.
  const kernels::StepDecision* decision = nullptr;
  int64_t alt_step = 0;
};

class Optimizer {
 public:
  // Validates every option (naming the bad field) and builds the decay table of `params`.
  static StatusOr<Optimizer> create(const OptimizerOptions& options, const std::vector<ParamExtent>& params);

  const OptimizerOptions& options() const { return options_; }
  // The peak learning rate after the batch-size rule.
  double peak_lr() const { return peak_lr_; }
  // The learning rate of step t (>= 1).
  double lr_at_step(int64_t t) const { return lr_at(options_.schedule, peak_lr_, t); }
  // Sorted global segments whose weight decay differs from options().weight_decay; a CUDA
  // engine uploads this table once and passes the device copy to update().
  const std::vector<kernels::DecaySegment>& decay_segments() const { return segments_; }

  kernels::AdamWArgs adamw_args(const SliceState& slice, int64_t t, float grad_scale) const;
  kernels::SgdArgs sgd_args(const SliceState& slice, int64_t t, float grad_scale) const;

  // Step t of one slice. CPU: runs now on the OpenMP team, with decay_segments().
  // CUDA: enqueued on `stream`; `device_segments` is the device copy of decay_segments()
  // (may be null only when that table is empty).
  Status update(DeviceKind device, const SliceState& slice, int64_t t, float grad_scale,
                const kernels::DecaySegment* device_segments = nullptr, cudaStream_t stream = nullptr) const;

 private:
  Optimizer(OptimizerOptions options, double peak_lr, std::vector<kernels::DecaySegment> segments)
      : options_(std::move(options)), peak_lr_(peak_lr), segments_(std::move(segments)) {}
  // The arguments every optimizer's kernel takes: slice, gradient, output, lr of step t, decay.
  kernels::SliceUpdateArgs slice_args(const SliceState& slice, int64_t t, float grad_scale) const;
  OptimizerOptions options_;
  double peak_lr_;
  std::vector<kernels::DecaySegment> segments_;
};

}  // namespace zdp::optim
