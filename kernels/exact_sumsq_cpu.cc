// exact_sumsq_cpu: kernels/exact_sumsq.h on the CPU. Threads take any share of the
// elements: their integer records add up to the same sum in any order.
#include <string>

#include "kernels/exact_sumsq.h"
#include "kernels/grad_check.h"

namespace zdp::kernels {

Status check_exact_sumsq_args(const ExactSumSqArgs& a) {
  if (a.count < 0 || a.count > kExactMaxElements || (a.count > 0 && a.grad == nullptr) || a.out == nullptr) {
    return Status(StatusCode::kInvalidArgument, "exact_sumsq: null gradient or record, or count " +
                                                    std::to_string(a.count) + " outside 0.." +
                                                    std::to_string(kExactMaxElements));
  }
  return Status::Ok();
}

Status exact_sumsq_cpu(const ExactSumSqArgs& a) {
  ZDP_RETURN_IF_ERROR(check_exact_sumsq_args(a));
  return dispatch_float(a.dtype, "exact_sumsq", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.grad);
#pragma omp parallel if (a.count > 65536)
    {
      ExactSumSq local{};
#pragma omp for schedule(static)
      for (int64_t k = 0; k < a.count; ++k) {
        const float f = to_f32(x[k]);
        const float y = f * a.scale;
        if (is_nonfinite(f) || is_nonfinite(y)) {
          local.nonfinite = 1;
        } else {
          exact_add_square(y, local.limb);
        }
      }
#pragma omp critical(zdp_exact_sumsq)
      {
        for (int i = 0; i < kExactLimbs; ++i) a.out->limb[i] += local.limb[i];
        a.out->nonfinite += local.nonfinite;
      }
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
