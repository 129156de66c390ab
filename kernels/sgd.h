// Fused SGD with momentum over one contiguous slice (the second optimizer), same pattern as
// kernels/adamw.h: per-element math here, a CPU loop (sgd_cpu.cc) and a CUDA launcher
// (cuda/sgd.cu) that both call it.
//
// Formula (torch.optim.SGD, t = step >= 1, g = grad * grad_scale):
//   g = g + wd * p                                   (coupled weight decay, when wd != 0)
//   buf = g                                 at t = 1 (when momentum != 0)
//   buf = momentum * buf + (1 - dampening) * g   t > 1
//   g = g + momentum * buf   (Nesterov)   or   g = buf   (classic)
//   p -= lr * g
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/philox.h"

namespace zdp::kernels {

enum class SgdMomentum : uint8_t { kClassic = 0, kNesterov };
const char* to_string(SgdMomentum kind);

struct SgdArgs {
  int64_t count = 0;
  int64_t global_offset = 0;         // global index of the slice's first element
  float* master = nullptr;           // fp32, updated in place
  float* momentum_buf = nullptr;     // fp32; may be null when momentum == 0
  const void* grad = nullptr;
  DType grad_dtype = DType::kF32;
  void* param_out = nullptr;         // compute-dtype copy; nullptr writes none
  DType param_dtype = DType::kBF16;
  Rounding rounding = Rounding::kNearest;
  uint64_t seed = 0;

  int64_t step = 1;  // counted from 1; step 1 initialises the momentum buffer
  float lr = 1e-2f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  SgdMomentum kind = SgdMomentum::kClassic;
  float weight_decay = 0.0f;  // for elements outside every segment
  float grad_scale = 1.0f;
  const DecaySegment* segments = nullptr;  // host (CPU) or device (CUDA) memory
  int64_t num_segments = 0;
};

struct SgdCoeffs {
  float lr;
  float momentum;
  float one_minus_dampening;
  float grad_scale;
  uint32_t first_step;  // 1 at t = 1
  SgdMomentum kind;
};

StatusOr<SgdCoeffs> sgd_coeffs(const SgdArgs& args);

ZDP_HD void sgd_element(float g_raw, float& p, float& buf, float weight_decay, const SgdCoeffs& c) {
  float g = g_raw * c.grad_scale;
  if (weight_decay != 0.0f) g = g + weight_decay * p;
  if (c.momentum != 0.0f) {
    buf = c.first_step ? g : c.momentum * buf + c.one_minus_dampening * g;
    g = c.kind == SgdMomentum::kNesterov ? g + c.momentum * buf : buf;
  }
  p = p - c.lr * g;
}

Status sgd_update_cpu(const SgdArgs& args);
// kUnavailable in builds without CUDA.
Status sgd_update_cuda(const SgdArgs& args, cudaStream_t stream);

}  // namespace zdp::kernels
