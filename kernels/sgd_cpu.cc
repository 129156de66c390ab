// Fused SGD with momentum on the CPU: argument checks and scalars shared with the CUDA
// launcher, and the OpenMP loop that calls sgd_element() (kernels/sgd.h).
#include <cmath>
#include <string>

#include "kernels/cpu_parallel.h"
#include "kernels/sgd.h"

namespace zdp::kernels {

const char* to_string(SgdMomentum kind) {
  switch (kind) {
    case SgdMomentum::kClassic: return "classic";
    case SgdMomentum::kNesterov: return "nesterov";
  }
  return "?";
}

StatusOr<SgdCoeffs> sgd_coeffs(const SgdArgs& a) {
  ZDP_RETURN_IF_ERROR(check_slice_update(a, "sgd"));
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "sgd: " + what); };
  if (a.count > 0 && a.momentum != 0.0f && !a.momentum_buf) return invalid("momentum != 0 needs a momentum buffer");
  if (!(a.momentum >= 0.0f) || !std::isfinite(a.momentum) || !std::isfinite(a.dampening)) {
    return invalid("momentum (" + std::to_string(a.momentum) + ") must be finite and >= 0, dampening (" +
                   std::to_string(a.dampening) + ") finite");
  }
  if (a.kind == SgdMomentum::kNesterov && (a.momentum <= 0.0f || a.dampening != 0.0f)) {
    return invalid("Nesterov momentum requires momentum > 0 and zero dampening");  // as torch.optim.SGD
  }
  SgdCoeffs c{};
  c.lr = a.lr;
  c.momentum = a.momentum;
  c.one_minus_dampening = static_cast<float>(1.0 - static_cast<double>(a.dampening));
  c.grad_scale = a.grad_scale;
  c.first_step = a.step == 1 ? 1u : 0u;
  c.kind = a.kind;
  return c;
}

namespace {

// One run of constant weight decay; everything below inlines into it (see ZDP_CPU_CLONES).
template <typename G, typename P>
ZDP_CPU_CLONES void update_run(const SgdArgs& a, const SgdCoeffs& c, int64_t begin, int64_t end, float wd) {
  float* __restrict master = a.master;
  float* __restrict buf = a.momentum_buf;
  if (buf) {
    cpu::update_loop<G, P>(a, begin, end, [&](int64_t i, float g) {
      float p = master[i], b = buf[i];
      sgd_element(g, p, b, wd, c);
      master[i] = p;
      buf[i] = b;
      return p;
    });
  } else {
    cpu::update_loop<G, P>(a, begin, end, [&](int64_t i, float g) {
      float p = master[i], unused = 0.0f;
      sgd_element(g, p, unused, wd, c);
      master[i] = p;
      return p;
    });
  }
}

}  // namespace

Status sgd_update_cpu(const SgdArgs& given) {
  ZDP_ASSIGN_OR_RETURN(SgdCoeffs c, sgd_coeffs(given));
  SgdArgs a = given;
  if (!resolve_decision(a)) return Status::Ok();  // the step is skipped
  if (given.decision != nullptr) {  // its grad_scale, step and lr
    ZDP_ASSIGN_OR_RETURN(c, sgd_coeffs(a));
  }
  // Without momentum the buffer is never read or written, even if one was passed.
  SgdArgs args = a;
  if (a.momentum == 0.0f) args.momentum_buf = nullptr;
  return cpu::update_slice(args, "sgd", [&](auto g, auto p, int64_t begin, int64_t end, float wd) {
    update_run<decltype(g), decltype(p)>(args, c, begin, end, wd);
  });
}

}  // namespace zdp::kernels
