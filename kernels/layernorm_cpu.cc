// LayerNorm on the CPU: rows in parallel on the OpenMP team; the column sums of the
// weight/bias gradients in parallel over (row chunk, column block) jobs, then the chunks'
// partial sums per column in chunk order (the GPU's order, layernorm.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/layernorm.h"

namespace zdp::kernels {
namespace {

Status invalid(const char* op, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, std::string(op) + ": " + what);
}

template <typename T>
void forward(const LayerNormArgs& a) {
  if (a.residual != nullptr) {  // sum = x + residual first, as add_cpu; then the norm of it
    const T* x = static_cast<const T*>(a.x);
    const T* res = static_cast<const T*>(a.residual);
    T* sum = static_cast<T*>(a.sum);
    const int64_t n = a.rows * a.cols;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) sum[i] = from_f32<T>(to_f32(x[i]) + to_f32(res[i]));
  }
  const T* x = static_cast<const T*>(a.residual != nullptr ? a.sum : a.x);
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y);
  const int64_t C = a.cols;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* xr = x + r * C;
    float sum = 0.0f;
    for (int64_t c = 0; c < C; ++c) sum += to_f32(xr[c]);
    const float mean = sum / static_cast<float>(C);
    float var = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float d = to_f32(xr[c]) - mean;
      var += d * d;
    }
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(C) + a.eps);
    for (int64_t c = 0; c < C; ++c) {
      y[r * C + c] = from_f32<T>(layernorm_y(layernorm_xhat(to_f32(xr[c]), mean, rstd), to_f32(w[c]), to_f32(b[c])));
    }
    a.mean[r] = mean;
    a.rstd[r] = rstd;
  }
}

template <typename T>
void backward(const LayerNormBackwardArgs& a) {
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.weight);
  T* dx = static_cast<T*>(a.dx);
  const int64_t C = a.cols;
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < a.rows; ++r) {
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float g = to_f32(dy[r * C + c]) * to_f32(w[c]);
      sum_g += g;
      sum_gx += g * layernorm_xhat(to_f32(x[r * C + c]), a.mean[r], a.rstd[r]);
    }
    for (int64_t c = 0; c < C; ++c) {
      const float g = to_f32(dy[r * C + c]) * to_f32(w[c]);
      float d = layernorm_dx(g, layernorm_xhat(to_f32(x[r * C + c]), a.mean[r], a.rstd[r]), sum_g * inv_c,
                             sum_gx * inv_c, a.rstd[r]);
      if (a.dx_mode == OutputMode::kAccumulate) d += to_f32(dx[r * C + c]);
      dx[r * C + c] = from_f32<T>(d);
    }
  }
  T* dw = static_cast<T*>(a.dweight);
  T* db = static_cast<T*>(a.dbias);
  // The GPU's order (kernels/common.h's column sums): chunks of rows; in a chunk,
  // kColumnSumLanes lanes of rows, each in row order, added in lane order; then the chunks
  // in order. A job is one chunk of one column block.
  constexpr int64_t kColumns = 64;  // a column block: one cache line of fp32 sums per lane
  const int64_t chunk = layernorm_row_chunk(a.rows), chunks = layernorm_chunks(a.rows);
  const int64_t col_blocks = (C + kColumns - 1) / kColumns;
  std::vector<float> own;
  float* part = a.partials;
  if (chunks > 1 && part == nullptr) {
    own.resize(static_cast<size_t>(layernorm_partials_floats(a.rows, C)));
    part = own.data();
  }
#pragma omp parallel for schedule(static)
  for (int64_t job = 0; job < col_blocks * chunks; ++job) {
    const int64_t k = job / col_blocks, c0 = (job % col_blocks) * kColumns;
    const int64_t c1 = std::min(C, c0 + kColumns), r0 = k * chunk, r1 = std::min(a.rows, (k + 1) * chunk);
    float sw[kColumnSumLanes][kColumns] = {}, sb[kColumnSumLanes][kColumns] = {};
    for (int64_t r = r0; r < r1; ++r) {
      float* lw = sw[(r - r0) % kColumnSumLanes];
      float* lb = sb[(r - r0) % kColumnSumLanes];
      for (int64_t c = c0; c < c1; ++c) {
        const float g = to_f32(dy[r * C + c]);
        lb[c - c0] += g;
        lw[c - c0] += g * layernorm_xhat(to_f32(x[r * C + c]), a.mean[r], a.rstd[r]);
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      float w_sum = sw[0][c - c0], b_sum = sb[0][c - c0];
      for (int l = 1; l < kColumnSumLanes; ++l) {
        w_sum += sw[l][c - c0];
        b_sum += sb[l][c - c0];
      }
      if (chunks == 1) {
        dw[c] = from_f32<T>(w_sum);
        db[c] = from_f32<T>(b_sum);
      } else {
        part[k * C + c] = w_sum;
        part[(chunks + k) * C + c] = b_sum;
      }
    }
  }
  if (chunks == 1) return;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    float sw = part[c], sb = part[chunks * C + c];
    for (int64_t k = 1; k < chunks; ++k) {
      sw += part[k * C + c];
      sb += part[(chunks + k) * C + c];
    }
    dw[c] = from_f32<T>(sw);
    db[c] = from_f32<T>(sb);
  }
}

}  // namespace

Status check_layernorm(const LayerNormArgs& a) {
  if (a.rows < 0 || a.cols < 1) return invalid("layernorm", "rows " + std::to_string(a.rows) + " / cols " + std::to_string(a.cols));
  if (a.rows > 0 && (!a.x || !a.weight || !a.bias || !a.y || !a.mean || !a.rstd)) {
    return invalid("layernorm", "x, weight, bias, y, mean and rstd must be non-null");
  }
  if (!(a.eps > 0.0f)) return invalid("layernorm", "eps must be > 0");
  if ((a.residual == nullptr) != (a.sum == nullptr)) return invalid("layernorm", "residual and sum: both or neither");
  return Status::Ok();
}

Status check_layernorm_backward(const LayerNormBackwardArgs& a) {
  if (a.rows < 0 || a.cols < 1) {
    return invalid("layernorm_backward", "rows " + std::to_string(a.rows) + " / cols " + std::to_string(a.cols));
  }
  if (!a.dy || !a.x || !a.weight || !a.mean || !a.rstd || !a.dx || !a.dweight || !a.dbias) {
    return invalid("layernorm_backward", "dy, x, weight, mean, rstd, dx, dweight and dbias must be non-null");
  }
  return Status::Ok();
}

Status check_layernorm_backward_partials(const LayerNormBackwardArgs& a) {
  ZDP_RETURN_IF_ERROR(check_layernorm_backward(a));
  if (layernorm_partials_floats(a.rows, a.cols) > 0 && a.partials == nullptr) {
    return invalid("layernorm_backward", "partials must be non-null on the GPU for " + std::to_string(a.rows) +
                                             " rows (" + std::to_string(layernorm_chunks(a.rows)) + " chunks of " +
                                             std::to_string(layernorm_row_chunk(a.rows)) + ")");
  }
  return Status::Ok();
}

Status layernorm_forward_cpu(const LayerNormArgs& a) {
  ZDP_RETURN_IF_ERROR(check_layernorm(a));
  return dispatch_float(a.dtype, "layernorm", [&](auto t) {
    forward<decltype(t)>(a);
    return Status::Ok();
  });
}

Status layernorm_backward_cpu(const LayerNormBackwardArgs& a) {
  ZDP_RETURN_IF_ERROR(check_layernorm_backward(a));
  return dispatch_float(a.dtype, "layernorm_backward", [&](auto t) {
    backward<decltype(t)>(a);
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
