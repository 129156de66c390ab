// Fused SGD with momentum on the GPU: the shared slice-update kernel
// (kernels/cuda/slice_update.cuh) around sgd_element() (kernels/sgd.h), as on the CPU.
#include "kernels/cuda/slice_update.cuh"
#include "kernels/sgd.h"

namespace zdp::kernels {
namespace {

using cuda::kVec;

// SGD's part of the update: the momentum buffer, null without momentum. At t = 1 it is
// written but not read (sgd_element() starts it from the gradient).
struct SgdOp {
  float* buf;
  SgdCoeffs c;
  SgdCoeffs alt;  // step t - 1's (SliceUpdateArgs::alt_step)

  __device__ void select(const StepDecision& d) {
    if (d.prev_skip != 0) c = alt;
    c.grad_scale = d.grad_scale;
  }

  __device__ void update8(int64_t i0, const float (&g)[kVec], float (&p)[kVec], const float (&wd)[kVec]) const {
    float b[kVec] = {};
    if (buf && !c.first_step) cuda::load8(buf + i0, b);
#pragma unroll
    for (int e = 0; e < kVec; ++e) sgd_element(g[e], p[e], b[e], wd[e], c);
    if (buf) cuda::store8(buf + i0, b);
  }

  __device__ void update1(int64_t i, float g, float& p, float wd) const {
    float b = buf && !c.first_step ? buf[i] : 0.0f;
    sgd_element(g, p, b, wd, c);
    if (buf) buf[i] = b;
  }

  bool aligned16() const { return cuda::aligned16(buf); }
};

}  // namespace

Status sgd_update_cuda(const SgdArgs& a, cudaStream_t stream) {
  ZDP_ASSIGN_OR_RETURN(const SgdCoeffs c, sgd_coeffs(a));
  SgdCoeffs alt = c;
  if (a.decision != nullptr) {
    ZDP_ASSIGN_OR_RETURN(alt, sgd_coeffs(with_alternative_step(a)));
  }
  // Without momentum the buffer is never read or written (as on the CPU).
  float* buf = a.momentum == 0.0f ? nullptr : a.momentum_buf;
  return cuda::launch_slice_update(a, SgdOp{buf, c, alt}, "sgd_update_cuda", stream);
}

}  // namespace zdp::kernels
