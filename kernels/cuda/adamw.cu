// Fused AdamW on the GPU: one grid-stride pass, 8 elements per thread and iteration with
// 16-byte loads and stores, calling adamw_element() (kernels/adamw.h) like the CPU loop.
#include <type_traits>

#include "kernels/adamw.h"
#include "kernels/cuda/common.cuh"

namespace zdp::kernels {
namespace {

using cuda::kVec;

template <typename G, typename P, Rounding R>
__global__ void __launch_bounds__(cuda::kBlock) adamw_kernel(AdamWArgs a, AdamWCoeffs c, int64_t num_vec) {
  const G* grad = static_cast<const G*>(a.grad);
  P* out = static_cast<P*>(a.param_out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t step = static_cast<uint64_t>(a.step);

  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    const int64_t i0 = vi * kVec;
    float g[kVec], p[kVec], m[kVec], v[kVec], wd[kVec];
    cuda::load8(grad + i0, g);
    cuda::load8(a.master + i0, p);
    cuda::load8(a.m + i0, m);
    cuda::load8(a.v + i0, v);
    cuda::decay8(a.segments, a.num_segments, a.global_offset + i0, a.weight_decay, wd);
#pragma unroll
    for (int e = 0; e < kVec; ++e) adamw_element(g[e], p[e], m[e], v[e], adamw_decay_factor(c.lr, wd[e]), c);
    cuda::store8(a.master + i0, p);
    cuda::store8(a.m + i0, m);
    cuda::store8(a.v + i0, v);
    if constexpr (!std::is_same_v<P, NoOutput>) {
      uint32_t bits[kVec] = {};
      if constexpr (R == Rounding::kStochastic) {
        cuda::random8(a.seed, step, static_cast<uint64_t>(a.global_offset + i0), bits);
      }
      P o[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] = round_param<P>(p[e], bits[e], R);
      cuda::store8(out + i0, o);
    }
  }

  // The elements past the last full vector (or all of them when unaligned), one each.
  for (int64_t i = num_vec * kVec + tid; i < a.count; i += stride) {
    const int64_t gi = a.global_offset + i;
    int64_t cursor = first_segment_ending_after(a.segments, a.num_segments, gi);
    const float wd = weight_decay_at(a.segments, a.num_segments, gi, a.weight_decay, cursor);
    float p = a.master[i], m = a.m[i], v = a.v[i];
    adamw_element(to_f32(grad[i]), p, m, v, adamw_decay_factor(c.lr, wd), c);
    a.master[i] = p;
    a.m[i] = m;
    a.v[i] = v;
    if constexpr (!std::is_same_v<P, NoOutput>) {
      const uint32_t bits = R == Rounding::kStochastic ? random16(a.seed, step, static_cast<uint64_t>(gi)) : 0u;
      out[i] = round_param<P>(p, bits, R);
    }
  }
}

template <typename G, typename P>
Status launch(const AdamWArgs& a, const AdamWCoeffs& c, cudaStream_t stream) {
  const bool vector = cuda::aligned16(a.master, a.m, a.v, a.grad, a.param_out);
  const int64_t num_vec = vector ? a.count / kVec : 0;
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vector ? num_vec : a.count));
  if constexpr (std::is_same_v<P, Bf16>) {  // adamw_coeffs() allows stochastic rounding for bf16 only
    if (a.rounding == Rounding::kStochastic) {
      adamw_kernel<G, P, Rounding::kStochastic><<<grid, cuda::kBlock, 0, stream>>>(a, c, num_vec);
      return cuda::check_launch("adamw_update_cuda");
    }
  }
  adamw_kernel<G, P, Rounding::kNearest><<<grid, cuda::kBlock, 0, stream>>>(a, c, num_vec);
  return cuda::check_launch("adamw_update_cuda");
}

}  // namespace

Status adamw_update_cuda(const AdamWArgs& a, cudaStream_t stream) {
  ZDP_ASSIGN_OR_RETURN(const AdamWCoeffs c, adamw_coeffs(a));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.grad_dtype, "adamw grad", [&](auto g) {
    using G = decltype(g);
    if (!a.param_out) return launch<G, NoOutput>(a, c, stream);
    return dispatch_float(a.param_dtype, "adamw param", [&](auto p) { return launch<G, decltype(p)>(a, c, stream); });
  });
}

}  // namespace zdp::kernels
