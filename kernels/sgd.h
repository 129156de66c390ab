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
#include "kernels/slice_update.h"

namespace zdp::kernels {

enum class SgdMomentum : uint8_t { kClassic = 0, kNesterov };
const char* to_string(SgdMomentum kind);

// step 1 initialises the momentum buffer (as torch.optim.SGD's first step does).
struct SgdArgs : SliceUpdateArgs {  // the slice, gradient, output, lr, decay: see there
  float* momentum_buf = nullptr;  // fp32; may be null when momentum == 0
  float momentum = 0.0f;
  float dampening = 0.0f;
  SgdMomentum kind = SgdMomentum::kClassic;
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
