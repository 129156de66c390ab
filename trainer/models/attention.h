// Causal multi-head self-attention from a fused qkv activation [batch x seq, 3 x d]
// (q, k, v of head h at columns h x hd, d + h x hd, 2d + h x hd): per (sample, head) the
// GEMMs S = Q K^T, O = P V and their backward through Ops::gemm, as strided batches over
// all heads (or all samples), and the causal softmax (scale 1/sqrt(hd) folded in) over all
// heads at once.
#pragma once

#include <cstdint>

#include "trainer/models/ops.h"

namespace zdp::trainer {

struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  int64_t width() const { return heads * head_dim; }
};

// probs: batch x heads x seq x seq (kept for backward); y: [batch x seq, d].
Status attention_forward(Ops& ops, const AttentionShape& s, const void* qkv, void* probs, void* y);
// From dy [batch x seq, d]: dqkv [batch x seq, 3 d] (overwritten). dprobs: scratch of probs' size.
Status attention_backward(Ops& ops, const AttentionShape& s, const void* qkv, const void* probs, const void* dy,
                          void* dprobs, void* dqkv);

}  // namespace zdp::trainer
