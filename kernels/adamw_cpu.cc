// Fused AdamW on the CPU: argument checks and per-step scalars shared with the CUDA
// launcher, and the OpenMP loops that call adamw_element() (kernels/adamw.h).
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/adamw.h"
#include "kernels/cpu_parallel.h"

namespace zdp::kernels {

StatusOr<AdamWCoeffs> adamw_coeffs(const AdamWArgs& a) {
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "adamw: " + what); };
  if (a.count < 0) return invalid("count " + std::to_string(a.count) + " < 0");
  if (a.global_offset < 0) return invalid("global_offset " + std::to_string(a.global_offset) + " < 0");
  if (a.count > 0 && (!a.master || !a.m || !a.v || !a.grad)) {
    return invalid("master, m, v and grad must be non-null for " + std::to_string(a.count) + " elements");
  }
  if (a.grad_dtype != DType::kF32 && a.grad_dtype != DType::kBF16 && a.grad_dtype != DType::kF16) {
    return invalid(std::string("grad dtype ") + to_string(a.grad_dtype) + " is not fp32, bf16 or fp16");
  }
  if (a.param_out && a.param_dtype != DType::kF32 && a.param_dtype != DType::kBF16 && a.param_dtype != DType::kF16) {
    return invalid(std::string("param dtype ") + to_string(a.param_dtype) + " is not fp32, bf16 or fp16");
  }
  if (a.rounding == Rounding::kStochastic && (!a.param_out || a.param_dtype != DType::kBF16)) {
    return invalid("stochastic rounding needs a bf16 param_out");
  }
  if (a.step < 1) return invalid("step " + std::to_string(a.step) + " < 1 (steps count from 1)");
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f) || !(a.beta2 >= 0.0f && a.beta2 < 1.0f)) {
    return invalid("betas (" + std::to_string(a.beta1) + ", " + std::to_string(a.beta2) + ") must lie in [0, 1)");
  }
  if (!(a.eps >= 0.0f) || !std::isfinite(a.lr) || !std::isfinite(a.weight_decay) || !std::isfinite(a.grad_scale)) {
    return invalid("eps must be >= 0 and lr, weight_decay, grad_scale finite");
  }
  if (a.num_segments < 0 || (a.num_segments > 0 && !a.segments)) return invalid("segments null or num_segments < 0");

  const double t = static_cast<double>(a.step);
  AdamWCoeffs c{};
  c.beta1 = a.beta1;
  c.one_minus_beta1 = static_cast<float>(1.0 - a.beta1);
  c.beta2 = a.beta2;
  c.one_minus_beta2 = static_cast<float>(1.0 - a.beta2);
  c.eps = a.eps;
  c.step_size = static_cast<float>(a.lr / (1.0 - std::pow(static_cast<double>(a.beta1), t)));
  c.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(a.beta2), t)));
  c.lr = a.lr;
  c.grad_scale = a.grad_scale;
  return c;
}

namespace {

// One run of constant weight decay; everything below inlines into it (see ZDP_CPU_CLONES).
template <typename G, typename P>
ZDP_CPU_CLONES void update_run(const AdamWArgs& a, const AdamWCoeffs& c, int64_t begin, int64_t end, float decay) {
  float* __restrict master = a.master;
  float* __restrict m = a.m;
  float* __restrict v = a.v;
  cpu::update_loop(static_cast<const G*>(a.grad), static_cast<P*>(a.param_out), begin, end, a.rounding, a.seed,
                   static_cast<uint64_t>(a.step), a.global_offset, [&](int64_t i, float g) {
                     float p = master[i], mi = m[i], vi = v[i];
                     adamw_element(g, p, mi, vi, decay, c);
                     master[i] = p;
                     m[i] = mi;
                     v[i] = vi;
                     return p;
                   });
}

template <typename G, typename P>
void update_slice(const AdamWArgs& a, const AdamWCoeffs& c) {
  cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
    cpu::for_each_decay_run(a.segments, a.num_segments, a.weight_decay, a.global_offset, begin, end,
                            [&](int64_t b, int64_t e, float wd) {
                              update_run<G, P>(a, c, b, e, adamw_decay_factor(a.lr, wd));
                            });
  });
}

}  // namespace

Status adamw_update_cpu(const AdamWArgs& a) {
  ZDP_ASSIGN_OR_RETURN(const AdamWCoeffs c, adamw_coeffs(a));
  ZDP_RETURN_IF_ERROR(validate_segments(a.segments, a.num_segments));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.grad_dtype, "adamw grad", [&](auto g) {
    using G = decltype(g);
    if (!a.param_out) {
      update_slice<G, NoOutput>(a, c);
      return Status::Ok();
    }
    return dispatch_float(a.param_dtype, "adamw param", [&](auto p) {
      update_slice<G, decltype(p)>(a, c);
      return Status::Ok();
    });
  });
}

}  // namespace zdp::kernels
