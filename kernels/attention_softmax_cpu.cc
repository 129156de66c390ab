// Causal softmax on the CPU: rows of all heads in parallel on the OpenMP team.
#include <string>

#include "kernels/attention_softmax.h"

namespace zdp::kernels {
namespace {

Status check_shape(const char* op, int64_t heads, int64_t seq, bool pointers) {
  if (heads < 0 || seq < 1) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(op) + ": heads " + std::to_string(heads) + " / seq " + std::to_string(seq));
  }
  if (heads > 0 && !pointers) return Status(StatusCode::kInvalidArgument, std::string(op) + ": null buffer");
  return Status::Ok();
}

}  // namespace

Status check_causal_softmax(const CausalSoftmaxArgs& a) {
  return check_shape("causal_softmax", a.heads, a.seq, a.scores && a.probs);
}
Status check_causal_softmax_backward(const CausalSoftmaxBackwardArgs& a) {
  return check_shape("causal_softmax_backward", a.heads, a.seq, a.probs && a.dprobs && a.dscores);
}

Status causal_softmax_forward_cpu(const CausalSoftmaxArgs& a) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax(a));
  return dispatch_float(a.dtype, "causal_softmax", [&](auto t) {
    using T = decltype(t);
    const T* s = static_cast<const T*>(a.scores);
    T* p = static_cast<T*>(a.probs);
    const int64_t T_ = a.seq;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < a.heads * T_; ++row) {
      const int64_t i = row % T_;
      const T* sr = s + row * T_;
      T* pr = p + row * T_;
      float m = -3.0e38f;
      for (int64_t j = 0; j <= i; ++j) m = std::max(m, a.scale * to_f32(sr[j]));
      float sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) sum += exp_branchless(a.scale * to_f32(sr[j]) - m);
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j <= i; ++j) pr[j] = from_f32<T>(causal_softmax_prob(a.scale * to_f32(sr[j]), m, inv));
      for (int64_t j = i + 1; j < T_; ++j) pr[j] = from_f32<T>(0.0f);
    }
    return Status::Ok();
  });
}

Status causal_softmax_backward_cpu(const CausalSoftmaxBackwardArgs& a) {
  ZDP_RETURN_IF_ERROR(check_causal_softmax_backward(a));
  return dispatch_float(a.dtype, "causal_softmax_backward", [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(a.probs);
    const T* dp = static_cast<const T*>(a.dprobs);
    T* ds = static_cast<T*>(a.dscores);
    const int64_t T_ = a.seq;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < a.heads * T_; ++row) {
      const int64_t i = row % T_, base = row * T_;
      float dot = 0.0f;
      for (int64_t j = 0; j <= i; ++j) dot += to_f32(p[base + j]) * to_f32(dp[base + j]);
      for (int64_t j = 0; j <= i; ++j) {
        ds[base + j] = from_f32<T>(causal_softmax_dscore(to_f32(p[base + j]), to_f32(dp[base + j]), dot, a.scale));
      }
      for (int64_t j = i + 1; j < T_; ++j) ds[base + j] = from_f32<T>(0.0f);
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
