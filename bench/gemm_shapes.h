// The GEMM shapes of one transformer layer, timed by gemm_bench (OpenBLAS) and
// gemm_gpu_bench (cuBLASLt). For width d over T tokens, in gemm.h's column-major terms
// (row-major Y[T, out] = X[T, in] W^T is m = out, n = T, k = in, A = W transposed):
// qkv 3d x T x d, proj d x T x d, fc1 4d x T x d, fc2 d x T x 4d (forward, (T,N));
// fc1 dX d x T x 4d (N,N) and fc1 dW d x 4d x T (N,T), the two backward products.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm.h"

namespace zdp::bench {

struct GemmShape {
  const char* name;
  kernels::Transpose ta, tb;
  int64_t m, n, k;

  // A and B as stored (column-major): the leading dimension is the row count.
  int64_t a_rows() const { return ta == kernels::Transpose::kNo ? m : k; }
  int64_t a_cols() const { return ta == kernels::Transpose::kNo ? k : m; }
  int64_t b_rows() const { return tb == kernels::Transpose::kNo ? k : n; }
  int64_t b_cols() const { return tb == kernels::Transpose::kNo ? n : k; }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

inline std::vector<GemmShape> transformer_layer_shapes(int64_t d, int64_t tokens) {
  using kernels::Transpose;
  return {
      {"qkv", Transpose::kYes, Transpose::kNo, 3 * d, tokens, d},
      {"proj", Transpose::kYes, Transpose::kNo, d, tokens, d},
      {"fc1", Transpose::kYes, Transpose::kNo, 4 * d, tokens, d},
      {"fc2", Transpose::kYes, Transpose::kNo, d, tokens, 4 * d},
      {"fc1 dX", Transpose::kNo, Transpose::kNo, d, tokens, 4 * d},
      {"fc1 dW", Transpose::kNo, Transpose::kYes, d, 4 * d, tokens},
  };
}

}  // namespace zdp::bench
