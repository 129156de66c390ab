// Fused AdamW on the CPU: argument checks and per-step scalars shared with the CUDA
// launcher, and the OpenMP loops that call adamw_element() (kernels/adamw.h).
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/adamw.h"
#include "kernels/cpu_parallel.h"

namespace zdp::kernels {

StatusOr<AdamWCoeffs> adamw_coeffs(const AdamWArgs& a) {
  ZDP_RETURN_IF_ERROR(check_slice_update(a, "adamw"));
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "adamw: " + what); };
  if (a.count > 0 && (!a.m || !a.v)) {
    return invalid("m and v must be non-null for " + std::to_string(a.count) + " elements");
  }
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f) || !(a.beta2 >= 0.0f && a.beta2 < 1.0f)) {
    return invalid("betas (" + std::to_string(a.beta1) + ", " + std::to_string(a.beta2) + ") must lie in [0, 1)");
  }
  if (!(a.eps >= 0.0f)) return invalid("eps (" + std::to_string(a.eps) + ") must be >= 0");

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
  cpu::update_loop<G, P>(a, begin, end, [&](int64_t i, float g) {
    float p = master[i], mi = m[i], vi = v[i];
    adamw_element(g, p, mi, vi, decay, c);
    master[i] = p;
    m[i] = mi;
    v[i] = vi;
    return p;
  });
}

}  // namespace

Status adamw_update_cpu(const AdamWArgs& args) {
  ZDP_ASSIGN_OR_RETURN(AdamWCoeffs c, adamw_coeffs(args));
  AdamWArgs a = args;
  if (!resolve_decision(a)) return Status::Ok();  // the step is skipped
  if (args.decision != nullptr) {  // its grad_scale, step and lr
    ZDP_ASSIGN_OR_RETURN(c, adamw_coeffs(a));
  }
  return cpu::update_slice(a, "adamw", [&](auto g, auto p, int64_t begin, int64_t end, float wd) {
    update_run<decltype(g), decltype(p)>(a, c, begin, end, adamw_decay_factor(a.lr, wd));
  });
}

}  // namespace zdp::kernels
