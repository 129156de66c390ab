// Fused softmax cross-entropy on the CPU: rows in parallel on the OpenMP team.
#include <cmath>
#include <string>

#include "kernels/cross_entropy.h"

namespace zdp::kernels {

Status check_cross_entropy(const CrossEntropyArgs& a) {
  if (a.rows < 0 || a.vocab < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "cross_entropy: rows " + std::to_string(a.rows) + " / vocab " + std::to_string(a.vocab));
  }
  if (a.rows > 0 && (!a.logits || !a.targets || !a.losses)) {
    return Status(StatusCode::kInvalidArgument, "cross_entropy: logits, targets and losses must be non-null");
  }
  return Status::Ok();
}

Status cross_entropy_cpu(const CrossEntropyArgs& a) {
  ZDP_RETURN_IF_ERROR(check_cross_entropy(a));
  for (int64_t r = 0; r < a.rows; ++r) {
    if (a.targets[r] < 0 || a.targets[r] >= a.vocab) {
      return Status(StatusCode::kInvalidArgument, "cross_entropy: target " + std::to_string(a.targets[r]) +
                                                      " of row " + std::to_string(r) + " is outside [0, " +
                                                      std::to_string(a.vocab) + ")");
    }
  }
  return dispatch_float(a.dtype, "cross_entropy", [&](auto t) {
    using T = decltype(t);
    const T* logits = static_cast<const T*>(a.logits);
    T* dlogits = static_cast<T*>(a.dlogits);
    const int64_t V = a.vocab;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a.rows; ++r) {
      const T* l = logits + r * V;
      float m = -3.0e38f;
      for (int64_t j = 0; j < V; ++j) m = std::max(m, to_f32(l[j]));
      float sum = 0.0f;
      for (int64_t j = 0; j < V; ++j) sum += exp_branchless(to_f32(l[j]) - m);
      const int32_t target = a.targets[r];
      a.losses[r] = std::log(sum) + m - to_f32(l[target]);
      if (dlogits != nullptr) {
        const float inv = 1.0f / sum;
        T* d = dlogits + r * V;
        for (int64_t j = 0; j < V; ++j) d[j] = from_f32<T>(cross_entropy_dlogit(to_f32(l[j]), m, inv, j == target, a.grad_scale));
      }
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
