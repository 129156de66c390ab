// Causal multi-head self-attention from a fused qkv activation [batch x seq, 3 x d]
// (q, k, v of head h at columns h x hd, d + h x hd, 2d + h x hd): per (sample, head) the
// GEMMs S = Q K^T, O = P V and their backward through Ops::gemm, as strided batches over
// all heads (or all samples), and the causal softmax (scale 1/sqrt(hd) folded in) over all
// heads at once. On GPUs in bf16/fp16 the same attention runs fused instead
// (kernels/fused_attention.h: cuDNN's flash attention, no seq x seq buffer) when
// Ops::use_fused_attention() says so; the batched path is the fallback and the reference.
#pragma once

#include <cstdint>

#include "trainer/models/ops.h"

namespace zdp::trainer {

struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  int64_t width() const { return heads * head_dim; }
};

kernels::FusedAttentionShape fused_shape(const AttentionShape& s, DType dtype);

// What the forward keeps for the backward: the batched path's probabilities (batch x
// heads x seq x seq, compute dtype) or the fused path's log-sum-exp per query (batch x
// heads x seq, fp32).
struct AttentionSaved {
  bool fused = false;
  void* probs = nullptr;
  float* stats = nullptr;
  // Elements of each (of the compute dtype for probs; fp32 stats) for one micro-batch.
  static int64_t probs_elements(const AttentionShape& s) { return s.batch * s.heads * s.seq * s.seq; }
  static int64_t stats_elements(const AttentionShape& s) { return s.batch * s.heads * s.seq; }
};

// y: [batch x seq, d].
Status attention_forward(Ops& ops, const AttentionShape& s, const void* qkv, const AttentionSaved& saved, void* y);
// From dy [batch x seq, d]: dqkv [batch x seq, 3 d] (overwritten). y: the forward's output
// (read by the fused path). dprobs: scratch of probs' size (batched path; null when fused).
Status attention_backward(Ops& ops, const AttentionShape& s, const void* qkv, const AttentionSaved& saved,
                          const void* y, const void* dy, void* dprobs, void* dqkv);

}  // namespace zdp::trainer
