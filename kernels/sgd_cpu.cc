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
  auto invalid = [](const std::string& what) { return Status(StatusCode::kInvalidArgument, "sgd: " + what); };
  if (a.count < 0 || a.global_offset < 0) return invalid("negative count or global_offset");
  if (a.count > 0 && (!a.master || !a.grad)) return invalid("master and grad must be non-null");
  if (a.count > 0 && a.momentum != 0.0f && !a.momentum_buf) return invalid("momentum != 0 needs a momentum buffer");
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
  if (!(a.momentum >= 0.0f) || !std::isfinite(a.momentum) || !std::isfinite(a.dampening) || !std::isfinite(a.lr) ||
      !std::isfinite(a.weight_decay) || !std::isfinite(a.grad_scale)) {
    return invalid("momentum must be >= 0 and lr, dampening, weight_decay, grad_scale finite");
  }
  if (a.kind == SgdMomentum::kNesterov && (a.momentum <= 0.0f || a.dampening != 0.0f)) {
    return invalid("Nesterov momentum requires momentum > 0 and zero dampening");  // as torch.optim.SGD
  }
  if (a.num_segments < 0 || (a.num_segments > 0 && !a.segments)) return invalid("segments null or num_segments < 0");
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
  const G* grad = static_cast<const G*>(a.grad);
  P* out = static_cast<P*>(a.param_out);
  const uint64_t step = static_cast<uint64_t>(a.step);
  if (buf) {
    cpu::update_loop(grad, out, begin, end, a.rounding, a.seed, step, a.global_offset, [&](int64_t i, float g) {
      float p = master[i], b = buf[i];
      sgd_element(g, p, b, wd, c);
      master[i] = p;
      buf[i] = b;
      return p;
    });
  } else {
    cpu::update_loop(grad, out, begin, end, a.rounding, a.seed, step, a.global_offset, [&](int64_t i, float g) {
      float p = master[i], unused = 0.0f;
      sgd_element(g, p, unused, wd, c);
      master[i] = p;
      return p;
    });
  }
}

template <typename G, typename P>
void update_slice(const SgdArgs& a, const SgdCoeffs& c) {
  cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
    cpu::for_each_decay_run(a.segments, a.num_segments, a.weight_decay, a.global_offset, begin, end,
                            [&](int64_t b, int64_t e, float wd) { update_run<G, P>(a, c, b, e, wd); });
  });
}

}  // namespace

Status sgd_update_cpu(const SgdArgs& a) {
  ZDP_ASSIGN_OR_RETURN(const SgdCoeffs c, sgd_coeffs(a));
  ZDP_RETURN_IF_ERROR(validate_segments(a.segments, a.num_segments));
  if (a.count == 0) return Status::Ok();
  // Without momentum the buffer is never read or written, even if one was passed.
  SgdArgs args = a;
  if (a.momentum == 0.0f) args.momentum_buf = nullptr;
  return dispatch_float(args.grad_dtype, "sgd grad", [&](auto g) {
    using G = decltype(g);
    if (!args.param_out) {
      update_slice<G, NoOutput>(args, c);
      return Status::Ok();
    }
    return dispatch_float(args.param_dtype, "sgd param", [&](auto p) {
      update_slice<G, decltype(p)>(args, c);
      return Status::Ok();
    });
  });
}

}  // namespace zdp::kernels
