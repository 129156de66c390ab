// Float64 references of the AdamW and SGD updates (the formulas of torch.optim.AdamW/SGD,
// with the exact hyper-parameter values the kernels get), each carrying the first-order
// bound of the error an fp32 implementation may make (testing/tolerance.h): every
// fp32 rounding of an intermediate r adds u * |r|, and earlier errors are propagated by
// the derivative of each operation. Rounded per-step constants (1 - b1, lr / (1 - b1^t),
// ...) count as one rounding each.
#pragma once

#include <cmath>
#include <cstdint>

#include "testing/tolerance.h"

namespace zdp::testing {

struct RefElement {
  double value = 0;  // exact (float64) value
  double error = 0;  // first-order bound of the fp32 error accumulated so far
};

struct AdamWRefHyper {
  double lr, beta1, beta2, eps, weight_decay, grad_scale;
};

// One element's AdamW state.
struct AdamWRef {
  RefElement p, m, v;

  void step(double g_raw, int64_t t, const AdamWRefHyper& h) {
    const double u = kUnitRoundoffF32;
    const double c1 = 1.0 - h.beta1, c2 = 1.0 - h.beta2;
    const double step_size = h.lr / (1.0 - std::pow(h.beta1, static_cast<double>(t)));
    const double bc2 = std::sqrt(1.0 - std::pow(h.beta2, static_cast<double>(t)));

    const double g = g_raw * h.grad_scale;
    const double e_g = u * std::fabs(g);
    const double lw = h.lr * h.weight_decay;
    const double decay = 1.0 - lw;
    const double e_decay = u * std::fabs(lw) + u * std::fabs(decay);
    const double p1 = p.value * decay;
    const double e_p1 = std::fabs(decay) * p.error + std::fabs(p.value) * e_decay + u * std::fabs(p1);

    const double m1 = h.beta1 * m.value + c1 * g;
    m.error = h.beta1 * m.error + c1 * e_g + u * c1 * std::fabs(g) + u * std::fabs(h.beta1 * m.value) +
              u * std::fabs(c1 * g) + u * std::fabs(m1);
    m.value = m1;

    const double gg = g * g;
    const double e_gg = 2 * std::fabs(g) * e_g + u * gg;
    const double t2 = c2 * gg;
    const double e_t2 = c2 * e_gg + 2 * u * t2;
    const double v1 = h.beta2 * v.value + t2;
    v.error = h.beta2 * v.error + u * h.beta2 * v.value + e_t2 + u * v1;
    v.value = v1;

    const double s = std::sqrt(v1);
    const double e_s = v.error / (2 * s) + u * s;
    const double q = s / bc2;
    const double e_q = e_s / bc2 + 2 * u * q;
    const double d = q + h.eps;
    const double e_d = e_q + u * d;
    const double r = m1 / d;
    const double e_r = m.error / d + std::fabs(m1) * e_d / (d * d) + u * std::fabs(r);
    const double upd = step_size * r;
    const double e_upd = step_size * e_r + 2 * u * std::fabs(upd);
    p.value = p1 - upd;
    p.error = e_p1 + e_upd + u * std::fabs(p.value);
  }
};

struct SgdRefHyper {
  double lr, momentum, dampening, weight_decay, grad_scale;
  bool nesterov;
};

struct SgdRef {
  RefElement p, buf;

  void step(double g_raw, int64_t t, const SgdRefHyper& h) {
    const double u = kUnitRoundoffF32;
    double g = g_raw * h.grad_scale;
    double e_g = u * std::fabs(g);
    if (h.weight_decay != 0.0) {
      const double wp = h.weight_decay * p.value;
      const double g2 = g + wp;
      e_g = e_g + h.weight_decay * p.error + u * std::fabs(wp) + u * std::fabs(g2);
      g = g2;
    }
    if (h.momentum != 0.0) {
      if (t == 1) {
        buf = RefElement{g, e_g};
      } else {
        const double c = 1.0 - h.dampening;
        const double mb = h.momentum * buf.value;
        const double b1 = mb + c * g;
        buf.error = h.momentum * buf.error + c * e_g + u * c * std::fabs(g) + u * std::fabs(mb) +
                    u * std::fabs(c * g) + u * std::fabs(b1);
        buf.value = b1;
      }
      if (h.nesterov) {
        const double mb = h.momentum * buf.value;
        const double g3 = g + mb;
        e_g = e_g + h.momentum * buf.error + u * std::fabs(mb) + u * std::fabs(g3);
        g = g3;
      } else {
        g = buf.value;
        e_g = buf.error;
      }
    }
    const double lg = h.lr * g;
    p.value = p.value - lg;
    p.error = p.error + h.lr * e_g + u * std::fabs(lg) + u * std::fabs(p.value);
  }
};

}  // namespace zdp::testing
