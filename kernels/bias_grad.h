// A linear layer's bias gradient: db[c] = sum over the rows r of dy[r][c] (dy: rows x cols,
// row-major; rows are tokens), summed in fp32 and rounded once into db's type.
//
// Why a kernel of its own: on an H200, the GEMMs that summed the bias gradient in
// cuBLASLt's epilogues (BGRADB on the weight gradient, DGELU_BGRAD on fc's input
// gradient) ran at 27-56% of the plain GEMMs' rate (stop 26's GPU check, profile.kernels),
// and a GEMV with a ones vector sums the rows in one CTA per 128 columns unless split-K
// is allowed, which deterministic mode forbids. Here every column's sum has one fixed
// order, on both devices:
//   the rows in chunks of bias_grad_row_chunk(rows) rows; in a chunk, kBiasGradLanes
//   lane sums, lane l taking rows l, l + lanes, ... of the chunk in row order; the chunk's
//   sum ((lane 0 + lane 1) + lane 2) + ...; then the chunks' sums in chunk order.
// A GPU block takes one chunk of a column range (so that a tall dy fills the machine),
// a thread one lane of 8 columns through 16-byte loads.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

struct BiasGradArgs {
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kF32;  // of dy and db
  const void* dy = nullptr;   // rows x cols
  void* db = nullptr;         // cols, overwritten
  // Scratch for the chunks' sums: bias_grad_partials_floats(rows, cols) floats. Required
  // on the GPU when there is more than one chunk; the CPU keeps its sums in registers.
  float* partials = nullptr;
};

inline constexpr int64_t kBiasGradMaxChunks = kColumnSumMaxChunks;
inline constexpr int kBiasGradLanes = kColumnSumLanes;

// Rows per chunk, and their number: kernels/common.h's rule (LayerNorm's too).
ZDP_HD int64_t bias_grad_row_chunk(int64_t rows) { return column_sum_row_chunk(rows); }
ZDP_HD int64_t bias_grad_chunks(int64_t rows) { return column_sum_chunks(rows); }
inline int64_t bias_grad_partials_floats(int64_t rows, int64_t cols) {
  const int64_t chunks = bias_grad_chunks(rows);
  return chunks > 1 ? chunks * cols : 0;
}

// Runs on the calling thread.
Status bias_grad_cpu(const BiasGradArgs& args);
// Enqueues on `stream`; kUnavailable in builds without CUDA.
Status bias_grad_cuda(const BiasGradArgs& args, cudaStream_t stream);
// Shared argument checks (partials are the GPU launcher's own check).
Status check_bias_grad(const BiasGradArgs& args);

}  // namespace zdp::kernels
