// The [optim] section of a config: which optimizer, its hyper-parameters, the learning-rate
// schedule and the batch-size rule. Owned by the optimizer library (zdp_optim), which
// turns it into fused-kernel updates; zdp/config.h reads it from TOML with these words.
#pragma once

#include <cstdint>

namespace zdp {

enum class OptimizerKind : int {
  kAdamW = 0,  // torch.optim.AdamW: decoupled weight decay, bias-corrected moments
  kSgd,        // torch.optim.SGD with momentum (beta1) and weight decay
};
// How the learning rate falls after warm-up (optim/schedule.h has the formulas).
enum class LrSchedule : int {
  kConstant = 0,  // stay at the peak after warm-up
  kCosine,        // half a cosine from the peak down to the floor
  kLinear,        // a straight line from the peak down to the floor
};
// How the learning rate follows the global batch B from the batch it was tuned at.
enum class LrScalingRule : int {
  kNone = 0,  // lr as configured, whatever the batch
  kLinear,    // lr * B / base_batch (Goyal et al. 2017, for SGD)
  kSqrt,      // lr * sqrt(B / base_batch) (Krizhevsky 2014; common for Adam)
};
// How an updated fp32 master weight becomes the bf16/fp16 parameter the model computes with.
enum class ParamRounding : int {
  kNearest = 0,  // round to nearest, ties to even
  // Round up with probability equal to the dropped fraction (unbiased: small updates are
  // not lost to rounding on average). The random bits are keyed by (train seed, optimizer
  // step, the element's index among all parameter elements), so every world size and
  // stage rounds an element the same way. bf16 and fp16 parameters only.
  kStochastic,
};
// The config word of each value, as written in TOML (the parser reads these same words).
const char* to_string(OptimizerKind value);  // "adamw" | "sgd"
const char* to_string(LrSchedule value);     // "constant" | "cosine" | "linear"
const char* to_string(LrScalingRule value);  // "none" | "linear" | "sqrt"
const char* to_string(ParamRounding value);  // "nearest" | "stochastic"

// [optim]: optimizer hyper-parameters and learning-rate schedule.
struct OptimConfig {
  OptimizerKind name = OptimizerKind::kAdamW;  // "adamw" | "sgd"
  double lr = 3e-4;                    // peak learning rate
  double beta1 = 0.9;                  // AdamW first-moment decay (SGD: momentum)
  double dampening = 0.0;              // SGD: the momentum buffer takes (1 - dampening) x gradient
  bool nesterov = false;               // SGD: Nesterov momentum (needs beta1 > 0, dampening 0)
  double beta2 = 0.999;                // AdamW second-moment decay
  double eps = 1e-8;                   // AdamW denominator epsilon
  double weight_decay = 0.01;          // decoupled weight decay
  double grad_clip = 1.0;              // max global gradient norm; 0 = no clipping
  LrSchedule schedule = LrSchedule::kConstant;  // "constant" | "cosine" | "linear" after warmup
  int64_t warmup_steps = 0;            // linear warmup from 0 to lr
  double min_lr = 0.0;                 // where cosine/linear decay ends
  LrScalingRule lr_scaling = LrScalingRule::kNone;  // lr (and min_lr) follow the global batch: "none" | "linear" | "sqrt"
  int64_t base_batch = 0;              // the global batch lr was tuned at; 0 = train.global_batch (no scaling)
  ParamRounding rounding = ParamRounding::kNearest;  // "nearest" | "stochastic" (bf16/fp16 parameters)
};

}  // namespace zdp
