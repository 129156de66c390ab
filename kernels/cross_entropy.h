// Softmax cross-entropy over rows of logits, fused with its gradient (llm.c-style): per
// row, loss = logsumexp(l) - l[target], and dlogits_j = grad_scale * (softmax_j - [j ==
// target]), written over the logits when asked (the logits are not needed afterwards).
// grad_scale is d(total loss)/d(row loss): 1 / rows for a mean, times the loss scale.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/gemm.h"  // exp_branchless

namespace zdp::kernels {

struct CrossEntropyArgs {
  int64_t rows = 0;
  int64_t vocab = 0;
  DType dtype = DType::kF32;      // of logits and dlogits
  const void* logits = nullptr;   // rows x vocab
  const int32_t* targets = nullptr;  // rows, each in [0, vocab)
  float* losses = nullptr;        // rows (fp32)
  void* dlogits = nullptr;        // rows x vocab, may alias logits; nullptr: forward only
  float grad_scale = 1.0f;
};

// From the exponential e = exp(logit - row_max) the sum was made of: exp_branchless on
// the CPU, the special-function unit's on the GPU (cuda::exp_sfu, within (2.5 + 1.25 |x|)
// ulp of each other's exact value; tests/gpu/layer_kernels_gpu_test.cc allows for it).
ZDP_HD float cross_entropy_dlogit_from_exp(float e, float inv_sum, bool is_target, float grad_scale) {
  return grad_scale * (e * inv_sum - (is_target ? 1.0f : 0.0f));
}
ZDP_HD float cross_entropy_dlogit(float logit, float row_max, float inv_sum, bool is_target, float grad_scale) {
  return cross_entropy_dlogit_from_exp(exp_branchless(logit - row_max), inv_sum, is_target, grad_scale);
}

Status check_cross_entropy(const CrossEntropyArgs& a);
Status cross_entropy_cpu(const CrossEntropyArgs& a);
// Enqueued on `stream`; kUnavailable in builds without CUDA.
Status cross_entropy_cuda(const CrossEntropyArgs& a, cudaStream_t stream);

}  // namespace zdp::kernels
