// Attention GEMMs in column-major terms (kernels/gemm.h): a row-major [rows, cols] block
// with row stride ld is a column-major cols x rows matrix with leading dimension ld. For
// one (sample, head): Q, K, V are hd x seq matrices (ld 3d), P and dP seq x seq (ld seq)
// with P(j, i) = probability of key j for query i, O and dO hd x seq (ld d).
#include "trainer/models/attention.h"

#include <cmath>

namespace zdp::trainer {
namespace {

using kernels::GemmArgs;
using kernels::Transpose;

const char* at(const void* base, int64_t elems, size_t elem_bytes) {
  return static_cast<const char*>(base) + elems * static_cast<int64_t>(elem_bytes);
}
char* at(void* base, int64_t elems, size_t elem_bytes) {
  return static_cast<char*>(base) + elems * static_cast<int64_t>(elem_bytes);
}

// C (m x n) = op(A) op(B) with the given leading dimensions.
Status mm(Ops& ops, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
          const void* b, int64_t ldb, void* c, int64_t ldc) {
  GemmArgs g;
  g.a.trans = ta, g.b.trans = tb;
  g.m = m, g.n = n, g.k = k;
  g.a.data = a, g.a.ld = lda;
  g.b.data = b, g.b.ld = ldb;
  g.c.data = c, g.c.ld = ldc;
  return ops.gemm(g);
}

}  // namespace

Status attention_forward(Ops& ops, const AttentionShape& s, const void* qkv, void* probs, void* y) {
  const size_t e = ops.elem_bytes();
  const int64_t d = s.width(), T = s.seq, hd = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t row0 = b * T * 3 * d;
      const void* q = at(qkv, row0 + h * hd, e);
      const void* k = at(qkv, row0 + d + h * hd, e);
      void* p = at(probs, (b * s.heads + h) * T * T, e);
      // S(j, i) = k_j . q_i  (the scores, row-major [query i][key j])
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kYes, Transpose::kNo, T, T, hd, k, 3 * d, q, 3 * d, p, T));
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ZDP_RETURN_IF_ERROR(ops.causal_softmax({s.batch * s.heads, T, ops.dtype(), scale, probs, probs}));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const void* v = at(qkv, b * T * 3 * d + 2 * d + h * hd, e);
      const void* p = at(probs, (b * s.heads + h) * T * T, e);
      // O(:, i) = sum_j v_j P(j, i)
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kNo, Transpose::kNo, hd, T, T, v, 3 * d, p, T, at(y, b * T * d + h * hd, e), d));
    }
  }
  return Status::Ok();
}

Status attention_backward(Ops& ops, const AttentionShape& s, const void* qkv, const void* probs, const void* dy,
                          void* dprobs, void* dqkv) {
  const size_t e = ops.elem_bytes();
  const int64_t d = s.width(), T = s.seq, hd = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const void* v = at(qkv, b * T * 3 * d + 2 * d + h * hd, e);
      const void* dout = at(dy, b * T * d + h * hd, e);
      // dP(j, i) = v_j . dO_i
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kYes, Transpose::kNo, T, T, hd, v, 3 * d, dout, d,
                             at(dprobs, (b * s.heads + h) * T * T, e), T));
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ZDP_RETURN_IF_ERROR(ops.causal_softmax_backward({s.batch * s.heads, T, ops.dtype(), scale, probs, dprobs, dprobs}));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t row0 = b * T * 3 * d;
      const void* q = at(qkv, row0 + h * hd, e);
      const void* k = at(qkv, row0 + d + h * hd, e);
      const void* p = at(probs, (b * s.heads + h) * T * T, e);
      const void* ds = at(dprobs, (b * s.heads + h) * T * T, e);  // now dS, scale included
      const void* dout = at(dy, b * T * d + h * hd, e);
      // dV(:, j) = sum_i dO_i P(j, i);  dQ(:, i) = sum_j k_j dS(j, i);  dK(:, j) = sum_i q_i dS(j, i)
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kNo, Transpose::kYes, hd, T, T, dout, d, p, T, at(dqkv, row0 + 2 * d + h * hd, e), 3 * d));
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kNo, Transpose::kNo, hd, T, T, k, 3 * d, ds, T, at(dqkv, row0 + h * hd, e), 3 * d));
      ZDP_RETURN_IF_ERROR(mm(ops, Transpose::kNo, Transpose::kYes, hd, T, T, q, 3 * d, ds, T, at(dqkv, row0 + d + h * hd, e), 3 * d));
    }
  }
  return Status::Ok();
}

}  // namespace zdp::trainer
