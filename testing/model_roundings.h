// An upper bound on the fp32 roundings along any path from a model's inputs to a result
// (its loss, or a gradient): each sum of length k counts k, each element-wise step a few
// (kPerStep). testing/tolerance.h's straight_line_bound(N, |y|) turns it into a bound;
// gpt_gpu_test and mlp_gpu_test compare two devices with it, model_gradcheck_test one
// device with a float64 reference.
#pragma once

#include <algorithm>
#include <cstdint>

#include "zdp/config.h"

namespace zdp::testing {

struct RoundingChain {
  int64_t forward = 0, total = 0;  // the forward's, and forward + backward's
};

// The GPT of `m` on a micro-batch of `tokens` tokens.
inline RoundingChain gpt_rounding_chain(const ModelConfig& m, int64_t tokens) {
  constexpr int64_t kPerStep = 8;  // gelu, exp, rsqrt, scale, bias, residual add: < 8 each
  const int64_t C = m.d_model, T = m.seq_len, hd = m.d_model / m.n_heads, V = m.vocab_size;
  const int64_t layernorm = 2 * C + kPerStep;               // mean, variance, normalise
  const int64_t block_forward = 2 * layernorm               // two norms
                                + C + hd + T + T + C        // qkv, q k^T, softmax, p v, proj
                                + C + 4 * C                 // fc, fc proj
                                + 6 * kPerStep;             // softmax exp, gelu, biases, adds
  const int64_t forward = m.n_layers * block_forward + layernorm + C + V + kPerStep;  // + norm_f, head, loss
  const int64_t block_backward = 2 * (2 * C + kPerStep)  // norm backward: two row sums each
                                 + 4 * C + C + C + 3 * C  // dx of fc proj, fc, proj, qkv
                                 + T + T + hd + T         // softmax backward, dP, dV/dQ/dK sums
                                 + 6 * kPerStep;
  const int64_t backward = V + 2 * C + kPerStep + m.n_layers * block_backward
                           + tokens;  // a weight gradient sums over all tokens (embeddings: their occurrences)
  return {forward, forward + backward};
}

// The MLP of `m` on a micro-batch of `samples` samples.
inline RoundingChain mlp_rounding_chain(const ModelConfig& m, int64_t samples) {
  constexpr int64_t kPerStep = 8;  // gelu, its derivative, exp, bias, scale: < 8 roundings each
  const int64_t layers = m.n_layers + 1, C = m.d_model, V = m.vocab_size;
  const int64_t forward = layers * (C + kPerStep) + V + kPerStep;  // linears + GELUs, the loss's row sum
  // dx sums, and a weight gradient's sum over samples
  return {forward, forward + layers * (std::max(C, V) + kPerStep) + samples};
}

}  // namespace zdp::testing
