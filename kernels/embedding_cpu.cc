// Embeddings on the CPU (rows in parallel), and the host-side token index of the backward.
#include <algorithm>
#include <string>

#include "kernels/embedding.h"

namespace zdp::kernels {
namespace {

Status invalid(const char* op, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, std::string(op) + ": " + what);
}

Status check_shape(const char* op, int64_t batch, int64_t seq, int64_t dim, int64_t vocab) {
  if (batch < 0 || seq < 1 || dim < 1 || vocab < 1) {
    return invalid(op, "batch " + std::to_string(batch) + ", seq " + std::to_string(seq) + ", dim " +
                           std::to_string(dim) + ", vocab " + std::to_string(vocab));
  }
  return Status::Ok();
}

}  // namespace

Status build_token_index(const int32_t* tokens, int64_t n, int64_t vocab, std::vector<int32_t>* offsets,
                         std::vector<int32_t>* order) {
  if (vocab < 1 || n < 0 || n > INT32_MAX) {
    return invalid("token index", std::to_string(n) + " tokens of vocab " + std::to_string(vocab));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return invalid("token index", "token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                                        " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
  offsets->assign(static_cast<size_t>(vocab + 1), 0);
  for (int64_t i = 0; i < n; ++i) ++(*offsets)[static_cast<size_t>(tokens[i] + 1)];
  for (int64_t v = 0; v < vocab; ++v) (*offsets)[static_cast<size_t>(v + 1)] += (*offsets)[static_cast<size_t>(v)];
  std::vector<int32_t> cursor(offsets->begin(), offsets->end() - 1);
  order->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) (*order)[static_cast<size_t>(cursor[static_cast<size_t>(tokens[i])]++)] = static_cast<int32_t>(i);
  return Status::Ok();
}

Status check_embedding(const EmbeddingArgs& a) {
  ZDP_RETURN_IF_ERROR(check_shape("embedding", a.batch, a.seq, a.dim, a.vocab));
  if (a.batch > 0 && (!a.tokens || !a.wte || !a.wpe || !a.out)) return invalid("embedding", "null buffer");
  return Status::Ok();
}

Status check_embedding_backward(const EmbeddingBackwardArgs& a) {
  ZDP_RETURN_IF_ERROR(check_shape("embedding_backward", a.batch, a.seq, a.dim, a.vocab));
  if (!a.dout || !a.offsets || !a.order || !a.dwte || !a.dwpe) return invalid("embedding_backward", "null buffer");
  return Status::Ok();
}

Status embedding_forward_cpu(const EmbeddingArgs& a) {
  ZDP_RETURN_IF_ERROR(check_embedding(a));
  for (int64_t n = 0; n < a.batch * a.seq; ++n) {
    if (a.tokens[n] < 0 || a.tokens[n] >= a.vocab) {
      return invalid("embedding", "token " + std::to_string(a.tokens[n]) + " at position " + std::to_string(n) +
                                      " is outside [0, " + std::to_string(a.vocab) + ")");
    }
  }
  return dispatch_float(a.dtype, "embedding", [&](auto t) {
    using T = decltype(t);
    const T* wte = static_cast<const T*>(a.wte);
    const T* wpe = static_cast<const T*>(a.wpe);
    T* out = static_cast<T*>(a.out);
    const int64_t C = a.dim;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a.batch * a.seq; ++n) {
      const T* e = wte + static_cast<int64_t>(a.tokens[n]) * C;
      const T* p = wpe + (n % a.seq) * C;
      for (int64_t c = 0; c < C; ++c) out[n * C + c] = from_f32<T>(to_f32(e[c]) + to_f32(p[c]));
    }
    return Status::Ok();
  });
}

Status embedding_backward_cpu(const EmbeddingBackwardArgs& a) {
  ZDP_RETURN_IF_ERROR(check_embedding_backward(a));
  return dispatch_float(a.dtype, "embedding_backward", [&](auto t) {
    using T = decltype(t);
    const T* dout = static_cast<const T*>(a.dout);
    T* dwte = static_cast<T*>(a.dwte);
    T* dwpe = static_cast<T*>(a.dwpe);
    const int64_t C = a.dim;
#pragma omp parallel for schedule(static)
    for (int64_t v = 0; v < a.vocab; ++v) {
      // Whole rows at a time (cache-friendly); each element still sums base, then the
      // positions in ascending order, as the CUDA kernel does.
      std::vector<float> acc(static_cast<size_t>(C), 0.0f);
      if (a.dwte_base) std::copy(a.dwte_base + v * C, a.dwte_base + (v + 1) * C, acc.begin());
      for (int32_t k = a.offsets[v]; k < a.offsets[v + 1]; ++k) {
        const T* row = dout + static_cast<int64_t>(a.order[k]) * C;
        for (int64_t c = 0; c < C; ++c) acc[static_cast<size_t>(c)] += to_f32(row[c]);
      }
      for (int64_t c = 0; c < C; ++c) dwte[v * C + c] = from_f32<T>(acc[static_cast<size_t>(c)]);
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < a.seq; ++t) {
      for (int64_t c = 0; c < C; ++c) {
        float s = 0.0f;
        for (int64_t b = 0; b < a.batch; ++b) s += to_f32(dout[(b * a.seq + t) * C + c]);
        dwpe[t * C + c] = from_f32<T>(s);
      }
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
