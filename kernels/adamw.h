// Fused AdamW over one contiguous slice of the flat parameter buffer, in one pass:
// unscale/clip the gradient, decoupled weight decay (per-segment table), moments, bias
// correction, the fp32 master update, and the parameter written in the compute dtype
// straight into the buffer the all-gather sends. The per-element math below is the one
// both launchers (CPU: adamw_cpu.cc, CUDA: cuda/adamw.cu) run.
//
// Formula (torch.optim.AdamW, t = step >= 1, g = grad * grad_scale):
//   p -= lr * wd * p                       (decoupled weight decay; wd from the segment table)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// which is p -= lr * mhat / (sqrt(vhat) + eps) with PyTorch's placement of eps.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.h"
#include "kernels/philox.h"
#include "kernels/slice_update.h"

namespace zdp::kernels {

struct AdamWArgs : SliceUpdateArgs {  // the slice, gradient, output, lr, decay: see there
  float* m = nullptr;  // fp32 first moment, updated in place
  float* v = nullptr;  // fp32 second moment, updated in place
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// The per-step scalars, computed once on the host in double and rounded once to float,
// so that every element on every device sees the very same values.
struct AdamWCoeffs {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float step_size;  // lr / (1 - beta1^t)
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float lr;
  float grad_scale;
};

// Checks the arguments (ranges, dtypes, null pointers, step >= 1) and derives the scalars.
StatusOr<AdamWCoeffs> adamw_coeffs(const AdamWArgs& args);

// 1 - lr * wd: the decoupled decay multiplier, computed in fp32 the same way everywhere.
ZDP_HD float adamw_decay_factor(float lr, float weight_decay) { return 1.0f - lr * weight_decay; }

// One element. `g_raw` is the gradient as stored (decoded to fp32); p, m, v in place.
// No fused multiply-adds: the CPU build uses -ffp-contract=off and nvcc --fmad=false,
// so CPU and GPU produce the same bits (tests/gpu/ checks it).
ZDP_HD void adamw_element(float g_raw, float& p, float& m, float& v, float decay, const AdamWCoeffs& c) {
  const float g = g_raw * c.grad_scale;
  p = p * decay;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
  p = p - c.step_size * (m / denom);
}

// Runs the update on the calling thread's OpenMP team (OMP_NUM_THREADS threads, static
// split). Results do not depend on the thread count.
Status adamw_update_cpu(const AdamWArgs& args);

// Enqueues the update on `stream`. kUnavailable in builds without CUDA.
Status adamw_update_cuda(const AdamWArgs& args, cudaStream_t stream);

}  // namespace zdp::kernels
