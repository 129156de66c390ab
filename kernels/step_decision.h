// The outcome of one optimizer step, decided where the gradient statistics are (device
// memory on CUDA), so that the optimizer kernels read it from there and the host never
// waits for the gradient norm inside a step: from the all-reduced per-bucket GradStats
// (kernels/grad_check.h) to the global norm, the clip coefficient, the factor the
// optimizer multiplies every stored gradient by, and whether the step is skipped (an inf
// or NaN anywhere: every rank sees the same all-reduced flag, so every rank skips).
//
// One __host__ __device__ function (decide_step) run by the CPU on its calling thread
// and by one CUDA thread: the same double-precision operations in the same order, so the
// same bits on both (IEEE division and square root on both; no contraction). The bucket
// order of the sum is fixed, so every rank decides the same. A later "deterministic" mode
// that changes how the norm is reduced changes it here, in one place.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/exact_sumsq.h"
#include "kernels/grad_check.h"

namespace zdp::kernels {

// What the optimizer kernels of one step read (SliceUpdateArgs::decision), and what the
// host learns afterwards (Engine::step_stats()). 32 bytes.
struct StepDecision {
  float grad_scale = 0.0f;  // clip_coef x inv_scale, rounded once to fp32 (0 when skipped)
  int32_t skip = 0;         // 1: a non-finite gradient somewhere; no parameter changes
  int32_t prev_skip = 0;    // the decision this one replaced said skip (SliceUpdateArgs::alt_step)
  int32_t reserved = 0;
  double grad_norm = 0.0;   // global L2 norm of the gradient the statistics were taken at
  double clip_coef = 1.0;   // min(1, max_norm / (grad_norm + 1e-6)); 1 without clipping; 0 when skipped
};
static_assert(sizeof(StepDecision) == 32, "StepDecision is copied to the host as 32 bytes");

struct StepDecisionArgs {
  const GradStats* stats = nullptr;  // one per bucket, summed over ranks (the all-reduce)
  int64_t buckets = 0;
  // Folded into grad_scale: 1 / (world x accum_steps x loss_scale). The statistics were
  // taken at this scale already (GradCheckArgs::scale), so grad_norm is the averaged,
  // unscaled gradient's.
  double inv_scale = 1.0;
  double max_norm = 0.0;         // global-norm clipping threshold; <= 0 disables clipping
  StepDecision* out = nullptr;   // read first (its skip becomes prev_skip), then overwritten
  // Deterministic mode, instead of stats: exact records summed over ranks (any number).
  const ExactSumSq* exact = nullptr;
  int64_t exact_records = 0;
};

// Finite, without <cmath> (the same test on host and device, no errno, no traps).
ZDP_HD bool is_finite_double(double x) { return x <= 1.7976931348623157e308 && x >= -1.7976931348623157e308; }

// PyTorch's clip_grad_norm_: min(1, max_norm / (total_norm + 1e-6)); max_norm <= 0: 1; a
// non-finite norm: 0 (the step is skipped anyway).
ZDP_HD double clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  if (!is_finite_double(total_norm)) return 0.0;
  const double c = max_norm / (total_norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

// The decision of one step (see the file comment). Sums the statistics in bucket order:
// squares in double (each bucket's float partial), the non-finite flags in float.
ZDP_HD void decide_step(const StepDecisionArgs& a) {
  double sum_sq = 0.0;
  float nonfinite = 0.0f;
  for (int64_t b = 0; b < a.buckets; ++b) {
    sum_sq += a.stats[b].sum_sq;
    nonfinite += a.stats[b].nonfinite;
  }
  StepDecision d;
  d.prev_skip = a.out->skip;
  // The global sum rounds to fp32 once, as one all-reduced GradStats would hold it.
  d.grad_norm = sqrt(static_cast<double>(static_cast<float>(sum_sq)));
  if (a.exact != nullptr) {  // the exact sum, rounded once to double
    bool bad = false;
    d.grad_norm = sqrt(exact_sum_to_double(a.exact, a.exact_records, &bad));
    nonfinite = bad ? 1.0f : 0.0f;
    // The exact sum leaves the non-finite values out: a skipped step's norm is not the
    // finite rest's but infinite, as the default mode's sum makes it (deterministic mode
    // printed "skipped" beside a finite norm).
    if (bad) d.grad_norm = static_cast<double>(INFINITY);
  }
  if (nonfinite > 0.0f || !is_finite_double(d.grad_norm)) {
    d.skip = 1;
    d.clip_coef = 0.0;
    d.grad_scale = 0.0f;
  } else {
    d.clip_coef = clip_coefficient(d.grad_norm, a.max_norm);
    d.grad_scale = static_cast<float>(d.clip_coef * a.inv_scale);
  }
  *a.out = d;
}

// Runs decide_step on the calling thread (host memory).
Status decide_step_cpu(const StepDecisionArgs& args);
// Enqueues decide_step on `stream` as one thread (device memory). kUnavailable without CUDA.
Status decide_step_cuda(const StepDecisionArgs& args, cudaStream_t stream);

}  // namespace zdp::kernels
