// The softmax of causal self-attention: `heads` independent seq x seq score matrices
// (row-major, row i = query i), each row i a softmax of scale * scores over keys 0..i;
// keys after i get probability 0 (the causal mask). The GEMMs around it (Q K^T, P V and
// their backward) go through kernels/gemm.h.
//   forward:  p_j = exp(scale s_j - m) / sum_{k<=i} exp(scale s_k - m),  m = max_{k<=i} scale s_k
//   backward: ds_j = scale * p_j * (dp_j - sum_{k<=i} p_k dp_k)
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/gemm.h"  // exp_branchless

namespace zdp::kernels {

struct CausalSoftmaxArgs {
  int64_t heads = 0;  // batch x attention heads
  int64_t seq = 0;
  DType dtype = DType::kF32;
  float scale = 1.0f;  // 1 / sqrt(head_dim)
  const void* scores = nullptr;  // heads x seq x seq
  void* probs = nullptr;         // may alias scores
};

struct CausalSoftmaxBackwardArgs {
  int64_t heads = 0;
  int64_t seq = 0;
  DType dtype = DType::kF32;
  float scale = 1.0f;
  const void* probs = nullptr;
  const void* dprobs = nullptr;
  void* dscores = nullptr;  // may alias dprobs
};

ZDP_HD float causal_softmax_prob(float scaled, float row_max, float inv_sum) {
  return exp_branchless(scaled - row_max) * inv_sum;
}
ZDP_HD float causal_softmax_dscore(float p, float dp, float dot, float scale) { return scale * p * (dp - dot); }

Status check_causal_softmax(const CausalSoftmaxArgs& a);
Status check_causal_softmax_backward(const CausalSoftmaxBackwardArgs& a);

Status causal_softmax_forward_cpu(const CausalSoftmaxArgs& a);
Status causal_softmax_backward_cpu(const CausalSoftmaxBackwardArgs& a);
// Enqueued on `stream`; kUnavailable in builds without CUDA.
Status causal_softmax_forward_cuda(const CausalSoftmaxArgs& a, cudaStream_t stream);
Status causal_softmax_backward_cuda(const CausalSoftmaxBackwardArgs& a, cudaStream_t stream);

}  // namespace zdp::kernels
