// Fused SGD with momentum on the GPU: the AdamW kernel's structure (kernels/cuda/adamw.cu)
// around sgd_element() (kernels/sgd.h).
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/sgd.h"

namespace zdp::kernels {
namespace {

using cuda::kVec;

template <typename G, typename P, Rounding R>
__global__ void __launch_bounds__(cuda::kBlock) sgd_kernel(SgdArgs a, SgdCoeffs c, int64_t num_vec) {
  const G* grad = static_cast<const G*>(a.grad);
  P* out = static_cast<P*>(a.param_out);
  float* buf = a.momentum_buf;  // null without momentum
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t step = static_cast<uint64_t>(a.step);

  for (int64_t vi = tid; vi < num_vec; vi += stride) {
    const int64_t i0 = vi * kVec;
    float g[kVec], p[kVec], b[kVec] = {}, wd[kVec];
    cuda::load8(grad + i0, g);
    cuda::load8(a.master + i0, p);
    if (buf && !c.first_step) cuda::load8(buf + i0, b);
    cuda::decay8(a.segments, a.num_segments, a.global_offset + i0, a.weight_decay, wd);
#pragma unroll
    for (int e = 0; e < kVec; ++e) sgd_element(g[e], p[e], b[e], wd[e], c);
    cuda::store8(a.master + i0, p);
    if (buf) cuda::store8(buf + i0, b);
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

  for (int64_t i = num_vec * kVec + tid; i < a.count; i += stride) {
    const int64_t gi = a.global_offset + i;
    int64_t cursor = first_segment_ending_after(a.segments, a.num_segments, gi);
    const float wd = weight_decay_at(a.segments, a.num_segments, gi, a.weight_decay, cursor);
    float p = a.master[i];
    float b = buf && !c.first_step ? buf[i] : 0.0f;
    sgd_element(to_f32(grad[i]), p, b, wd, c);
    a.master[i] = p;
    if (buf) buf[i] = b;
    if constexpr (!std::is_same_v<P, NoOutput>) {
      const uint32_t bits = R == Rounding::kStochastic ? random16(a.seed, step, static_cast<uint64_t>(gi)) : 0u;
      out[i] = round_param<P>(p, bits, R);
    }
  }
}

template <typename G, typename P>
Status launch(const SgdArgs& a, const SgdCoeffs& c, cudaStream_t stream) {
  const bool vector = cuda::aligned16(a.master, a.momentum_buf, a.grad, a.param_out);
  const int64_t num_vec = vector ? a.count / kVec : 0;
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(vector ? num_vec : a.count));
  if constexpr (std::is_same_v<P, Bf16>) {  // sgd_coeffs() allows stochastic rounding for bf16 only
    if (a.rounding == Rounding::kStochastic) {
      sgd_kernel<G, P, Rounding::kStochastic><<<grid, cuda::kBlock, 0, stream>>>(a, c, num_vec);
      return cuda::check_launch("sgd_update_cuda");
    }
  }
  sgd_kernel<G, P, Rounding::kNearest><<<grid, cuda::kBlock, 0, stream>>>(a, c, num_vec);
  return cuda::check_launch("sgd_update_cuda");
}

}  // namespace

Status sgd_update_cuda(const SgdArgs& args, cudaStream_t stream) {
  ZDP_ASSIGN_OR_RETURN(const SgdCoeffs c, sgd_coeffs(args));
  if (args.count == 0) return Status::Ok();
  SgdArgs a = args;
  if (a.momentum == 0.0f) a.momentum_buf = nullptr;  // never read or written then (as on the CPU)
  return dispatch_float(a.grad_dtype, "sgd grad", [&](auto g) {
    using G = decltype(g);
    if (!a.param_out) return launch<G, NoOutput>(a, c, stream);
    return dispatch_float(a.param_dtype, "sgd param", [&](auto p) { return launch<G, decltype(p)>(a, c, stream); });
  });
}

}  // namespace zdp::kernels
