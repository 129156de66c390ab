// LayerNorm over the last dimension of a rows x cols activation (GPT-2's pre-norm),
// optionally of x + residual (the residual stream's add fused in, LayerNormArgs::sum):
//   y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps)  (biased variance)
// Forward keeps mean and rstd (fp32, one per row) for backward. Backward:
//   g = dy * weight;  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dweight = sum over rows of dy * xhat;  dbias = sum over rows of dy
// Activations and parameters are in `dtype` (fp32, bf16, fp16); all math is fp32, with
// row and column sums taken in a fixed order (deterministic on either device). The column
// sums of dweight/dbias run in two passes on both devices, in kernels/common.h's order
// (the bias gradients' too, so dbias has bias_grad's bits): each chunk of
// layernorm_row_chunk(rows) rows is summed in kColumnSumLanes lanes of rows, then the
// lanes in order (a GPU block per chunk and column range, so that a tall input fills the
// machine), then the chunks' partial sums in chunk order.
#pragma once

#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

// Whether a kernel overwrites its output or adds to it (the residual stream's gradient
// collects one contribution per branch).
enum class OutputMode : uint8_t { kOverwrite = 0, kAccumulate };

struct LayerNormArgs {
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kF32;
  const void* x = nullptr;
  const void* weight = nullptr;  // cols
  const void* bias = nullptr;    // cols
  void* y = nullptr;
  float* mean = nullptr;  // rows
  float* rstd = nullptr;  // rows
  float eps = 1e-5f;
  // Fused residual add (both or neither): sum = x + residual, rounded to `dtype` and
  // stored, then normalised instead of x: the same bits as an add (elementwise.h) followed
  // by a LayerNorm of its output, with one pass over the row less on the GPU.
  const void* residual = nullptr;
  void* sum = nullptr;
};

struct LayerNormBackwardArgs {
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kF32;
  const void* dy = nullptr;
  const void* x = nullptr;
  const void* weight = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  void* dx = nullptr;
  OutputMode dx_mode = OutputMode::kOverwrite;
  void* dweight = nullptr;  // overwritten (the gradient of this micro-batch)
  void* dbias = nullptr;
  // Scratch for the chunks' partial sums: layernorm_partials_floats(rows, cols) floats.
  // Required on the GPU when there is more than one chunk; the CPU uses its own when null.
  float* partials = nullptr;
};

// Rows per chunk of the dweight/dbias sums, and their number: kernels/common.h's rule.
inline constexpr int64_t kLayerNormMaxChunks = kColumnSumMaxChunks;
ZDP_HD int64_t layernorm_row_chunk(int64_t rows) { return column_sum_row_chunk(rows); }
ZDP_HD int64_t layernorm_chunks(int64_t rows) { return column_sum_chunks(rows); }
// dweight's partials (chunk-major, cols each), then dbias's; none for a single chunk.
inline int64_t layernorm_partials_floats(int64_t rows, int64_t cols) {
  const int64_t chunks = layernorm_chunks(rows);
  return chunks > 1 ? 2 * chunks * cols : 0;
}

ZDP_HD float layernorm_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }
ZDP_HD float layernorm_y(float xhat, float weight, float bias) { return xhat * weight + bias; }
// One element of dx from the row sums: mean_g = mean(g), mean_gx = mean(g * xhat).
ZDP_HD float layernorm_dx(float g, float xhat, float mean_g, float mean_gx, float rstd) {
  return rstd * ((g - mean_g) - xhat * mean_gx);
}

// kInvalidArgument naming the bad field (null pointers, negative sizes, a non-float dtype).
Status check_layernorm(const LayerNormArgs& a);
Status check_layernorm_backward(const LayerNormBackwardArgs& a);
// The same, and partials non-null where there is more than one chunk (the GPU's check).
Status check_layernorm_backward_partials(const LayerNormBackwardArgs& a);

Status layernorm_forward_cpu(const LayerNormArgs& a);
Status layernorm_backward_cpu(const LayerNormBackwardArgs& a);
// Enqueued on `stream`; kUnavailable in builds without CUDA.
Status layernorm_forward_cuda(const LayerNormArgs& a, cudaStream_t stream);
Status layernorm_backward_cuda(const LayerNormBackwardArgs& a, cudaStream_t stream);

}  // namespace zdp::kernels
