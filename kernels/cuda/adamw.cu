// Fused AdamW on the GPU: the shared slice-update kernel (kernels/cuda/slice_update.cuh)
// around adamw_element() (kernels/adamw.h), the math the CPU loop calls too.
#include "kernels/adamw.h"
#include "kernels/cuda/slice_update.cuh"

namespace zdp::kernels {
namespace {

using cuda::kVec;

// AdamW's part of the update: the moments m and v.
struct AdamWOp {
  float* m;
  float* v;
  AdamWCoeffs c;
  AdamWCoeffs alt;  // step t - 1's (SliceUpdateArgs::alt_step)

  __device__ void select(const StepDecision& d) {
    if (d.prev_skip != 0) c = alt;
    c.grad_scale = d.grad_scale;
  }

  __device__ void update8(int64_t i0, const float (&g)[kVec], float (&p)[kVec], const float (&wd)[kVec]) const {
    float m8[kVec], v8[kVec];
    cuda::load8(m + i0, m8);
    cuda::load8(v + i0, v8);
#pragma unroll
    for (int e = 0; e < kVec; ++e) adamw_element(g[e], p[e], m8[e], v8[e], adamw_decay_factor(c.lr, wd[e]), c);
    cuda::store8(m + i0, m8);
    cuda::store8(v + i0, v8);
  }

  __device__ void update1(int64_t i, float g, float& p, float wd) const {
    float mi = m[i], vi = v[i];
    adamw_element(g, p, mi, vi, adamw_decay_factor(c.lr, wd), c);
    m[i] = mi;
    v[i] = vi;
  }

  bool aligned16() const { return cuda::aligned16(m, v); }
};

}  // namespace

Status adamw_update_cuda(const AdamWArgs& a, cudaStream_t stream) {
  ZDP_ASSIGN_OR_RETURN(const AdamWCoeffs c, adamw_coeffs(a));
  AdamWCoeffs alt = c;
  if (a.decision != nullptr) {
    ZDP_ASSIGN_OR_RETURN(alt, adamw_coeffs(with_alternative_step(a)));
  }
  return cuda::launch_slice_update(a, AdamWOp{a.m, a.v, c, alt}, "adamw_update_cuda", stream);
}

}  // namespace zdp::kernels
