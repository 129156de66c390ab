// Token + position embeddings of a GPT: out[b, t] = wte[tokens[b, t]] + wpe[t]. Backward
// without atomics, so it is deterministic on either device: a token index (CSR, built on
// the host where the tokens come from) lists for each vocabulary row the positions that
// used it, in increasing order, and each row of dwte sums exactly those:
//   dwte[v] = base[v] + sum over positions n with tokens[n] == v of dout[n]
//   dwpe[t] = sum over b of dout[b, t]
// `base` carries the tied LM head's gradient of the same matrix (fp32), so the two
// contributions meet in one write of the engine's gradient view.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common.h"

namespace zdp::kernels {

struct EmbeddingArgs {
  int64_t batch = 0, seq = 0, dim = 0, vocab = 0;
  DType dtype = DType::kF32;        // of wte, wpe, out
  const int32_t* tokens = nullptr;  // batch x seq
  const void* wte = nullptr;        // vocab x dim
  const void* wpe = nullptr;        // (>= seq) x dim
  void* out = nullptr;              // batch x seq x dim
};

struct EmbeddingBackwardArgs {
  int64_t batch = 0, seq = 0, dim = 0, vocab = 0;
  DType dtype = DType::kF32;           // of dout, dwte, dwpe
  const void* dout = nullptr;          // batch x seq x dim
  const int32_t* offsets = nullptr;    // vocab + 1: token v's positions are order[offsets[v] .. offsets[v + 1])
  const int32_t* order = nullptr;      // batch x seq positions grouped by token
  const float* dwte_base = nullptr;    // vocab x dim, or nullptr for zeros
  void* dwte = nullptr;                // vocab x dim, overwritten
  void* dwpe = nullptr;                // seq x dim, overwritten (rows past seq are not touched)
};

// The token index of `tokens` (n of them, each in [0, vocab)): offsets (vocab + 1) and
// order (n), positions ascending within each token. kInvalidArgument naming the first
// token outside [0, vocab) (it indexed the host's offsets out of bounds).
Status build_token_index(const int32_t* tokens, int64_t n, int64_t vocab, std::vector<int32_t>* offsets,
                         std::vector<int32_t>* order);

Status check_embedding(const EmbeddingArgs& a);
Status check_embedding_backward(const EmbeddingBackwardArgs& a);

Status embedding_forward_cpu(const EmbeddingArgs& a);
Status embedding_backward_cpu(const EmbeddingBackwardArgs& a);
// Enqueued on `stream`; kUnavailable in builds without CUDA.
Status embedding_forward_cuda(const EmbeddingArgs& a, cudaStream_t stream);
Status embedding_backward_cuda(const EmbeddingBackwardArgs& a, cudaStream_t stream);

}  // namespace zdp::kernels
