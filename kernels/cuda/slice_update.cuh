// The grid-stride kernel and launcher every fused optimizer update shares (cuda/adamw.cu,
// cuda/sgd.cu): gradient and master loads, each element's weight decay, the master store and
// the compute-dtype output with its rounding; 8 elements per thread and iteration with
// 16-byte loads where every pointer is aligned, the rest one at a time. The optimizer's own
// part is `Op`: its state (moments, momentum buffer) and per-element math,
//   __device__ void update8(int64_t i0, const float (&g)[kVec], float (&p)[kVec], const float (&wd)[kVec]) const;
//   __device__ void update1(int64_t i, float g, float& p, float wd) const;
//   bool aligned16() const;  // its state pointers allow the vector path
//   __device__ void select(const StepDecision& d);  // this step's grad_scale and, after a
//                                                   // skipped step, the alternative scalars
// where i0 / i index the slice, g is the stored gradient as fp32 and p the master weight.
#pragma once

#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/slice_update.h"

namespace zdp::kernels::cuda {

template <typename G, typename P, Rounding R, typename Op>
__global__ void __launch_bounds__(kBlock) slice_update_kernel(SliceUpdateArgs a, Op op, int64_t num_vec) {
  const G* grad = static_cast<const G*>(a.grad);
  P* out = static_cast<P*>(a.param_out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t step = static_cast<uint64_t>(a.step);
  if (a.decision != nullptr) {  // the step's outcome, decided on the device after the launch was issued
    const StepDecision d = *a.decision;
    if (d.skip != 0) return;
    op.select(d);
    if (d.prev_skip != 0) step = static_cast<uint64_t>(a.alt_step);
  }

  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    const int64_t i0 = vi * kVec;
    float g[kVec], p[kVec], wd[kVec];
    load8(grad + i0, g);
    load8(a.master + i0, p);
    decay8(a.segments, a.num_segments, a.global_offset + i0, a.weight_decay, wd);
    op.update8(i0, g, p, wd);
    store8(a.master + i0, p);
    if constexpr (!std::is_same_v<P, NoOutput>) {
      uint32_t bits[kVec] = {};
      if constexpr (R == Rounding::kStochastic) {
        random8(a.seed, step, static_cast<uint64_t>(a.global_offset + i0), bits);
      }
      P o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] = round_param<P>(p[e], bits[e], R);
      store8(out + i0, o);
    }
  }

  // The elements past the last full vector (or all of them when unaligned), one each.
  for (int64_t i = num_vec * kVec + tid; i < a.count; i += stride) {
    const int64_t gi = a.global_offset + i;
    int64_t cursor = first_segment_ending_after(a.segments, a.num_segments, gi);
    const float wd = weight_decay_at(a.segments, a.num_segments, gi, a.weight_decay, cursor);
    float p = a.master[i];
    op.update1(i, to_f32(grad[i]), p, wd);
    a.master[i] = p;
    if constexpr (!std::is_same_v<P, NoOutput>) {
      const uint32_t bits = R == Rounding::kStochastic ? random16(a.seed, step, static_cast<uint64_t>(gi)) : 0u;
      out[i] = round_param<P>(p, bits, R);
    }
  }
}

// Enqueues the update of the slice `a` on `stream`; `name` labels the launch and the dtype
// errors. The caller has checked the arguments (check_slice_update and its own).
template <typename Op>
Status launch_slice_update(const SliceUpdateArgs& a, const Op& op, const char* name, cudaStream_t stream) {
  if (a.count == 0) return Status::Ok();
  return dispatch_update_types(a, name, [&](auto g, auto p) -> Status {
    using G = decltype(g);
    using P = decltype(p);
    const bool vector = aligned16(a.master, a.grad, a.param_out) && op.aligned16();
    const int64_t num_vec = vector ? a.count / kVec : 0;
    ZDP_ASSIGN_OR_RETURN(const int grid, grid_for(vector ? num_vec : a.count));
    if constexpr (std::is_same_v<P, Bf16> || std::is_same_v<P, Half>) {  // stochastic rounding: 16-bit outputs only
      if (a.rounding == Rounding::kStochastic) {
        slice_update_kernel<G, P, Rounding::kStochastic, Op><<<grid, kBlock, 0, stream>>>(a, op, num_vec);
        return check_launch(name);
      }
    }
    slice_update_kernel<G, P, Rounding::kNearest, Op><<<grid, kBlock, 0, stream>>>(a, op, num_vec);
    return check_launch(name);
  });
}

}  // namespace zdp::kernels::cuda
