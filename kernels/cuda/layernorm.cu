// LayerNorm on the GPU: one warp per row for the forward and for dx (warp-shuffle sums).
// dweight/dbias in two passes, deterministic and without atomics (layernorm.h): a block
// per (column range, chunk of rows), one thread per column summing its chunk's rows in
// order; then one thread per column summing the chunks in order. For gpt2-124m (16,384
// rows, d = 768) that is 384 blocks instead of 3, each thread walking 128 rows, not 16,384.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"
#include "kernels/layernorm.h"

namespace zdp::kernels {
namespace {

template <typename T>
__global__ void layernorm_forward_kernel(LayerNormArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.rows) return;
  const int64_t C = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32) sum += to_f32(x[c]);
  const float mean = cuda::warp_sum(sum) / static_cast<float>(C);
  float var = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float d = to_f32(x[c]) - mean;
    var += d * d;
  }
  const float rstd = 1.0f / sqrtf(cuda::warp_sum(var) / static_cast<float>(C) + a.eps);
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y) + row * C;
  for (int64_t c = lane; c < C; c += 32) {
    y[c] = from_f32<T>(layernorm_y(layernorm_xhat(to_f32(x[c]), mean, rstd), to_f32(w[c]), to_f32(b[c])));
  }
  if (lane == 0) {
    a.mean[row] = mean;
    a.rstd[row] = rstd;
  }
}

template <typename T>
__global__ void layernorm_dx_kernel(LayerNormBackwardArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.rows) return;
  const int64_t C = a.cols;
  const T* dy = static_cast<const T*>(a.dy) + row * C;
  const T* x = static_cast<const T*>(a.x) + row * C;
  const T* w = static_cast<const T*>(a.weight);
  const float mean = a.mean[row], rstd = a.rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float g = to_f32(dy[c]) * to_f32(w[c]);
    sum_g += g;
    sum_gx += g * layernorm_xhat(to_f32(x[c]), mean, rstd);
  }
  const float mean_g = cuda::warp_sum(sum_g) / static_cast<float>(C);
  const float mean_gx = cuda::warp_sum(sum_gx) / static_cast<float>(C);
  T* dx = static_cast<T*>(a.dx) + row * C;
  for (int64_t c = lane; c < C; c += 32) {
    float d = layernorm_dx(to_f32(dy[c]) * to_f32(w[c]), layernorm_xhat(to_f32(x[c]), mean, rstd), mean_g, mean_gx, rstd);
    if (a.dx_mode == OutputMode::kAccumulate) d += to_f32(dx[c]);
    dx[c] = from_f32<T>(d);
  }
}

template <typename T>
__global__ void layernorm_dparams_partial_kernel(LayerNormBackwardArgs a, int64_t chunk, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.cols) return;
  const int64_t k = blockIdx.y;
  const int64_t r1 = min(a.rows, (k + 1) * chunk);
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  float sw = 0.0f, sb = 0.0f;
  for (int64_t r = k * chunk; r < r1; ++r) {
    const float g = to_f32(dy[r * a.cols + c]);
    sb += g;
    sw += g * layernorm_xhat(to_f32(x[r * a.cols + c]), a.mean[r], a.rstd[r]);
  }
  if (chunks == 1) {
    static_cast<T*>(a.dweight)[c] = from_f32<T>(sw);
    static_cast<T*>(a.dbias)[c] = from_f32<T>(sb);
  } else {
    a.partials[k * a.cols + c] = sw;
    a.partials[(chunks + k) * a.cols + c] = sb;
  }
}

template <typename T>
__global__ void layernorm_dparams_final_kernel(LayerNormBackwardArgs a, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.cols) return;
  const float* p = a.partials;
  float sw = p[c], sb = p[chunks * a.cols + c];
  for (int64_t k = 1; k < chunks; ++k) {
    sw += p[k * a.cols + c];
    sb += p[(chunks + k) * a.cols + c];
  }
  static_cast<T*>(a.dweight)[c] = from_f32<T>(sw);
  static_cast<T*>(a.dbias)[c] = from_f32<T>(sb);
}

}  // namespace

Status layernorm_forward_cuda(const LayerNormArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_layernorm(a));
  if (a.rows == 0) return Status::Ok();
  return dispatch_float(a.dtype, "layernorm", [&](auto t) {
    layernorm_forward_kernel<decltype(t)><<<cuda::warp_rows_grid(a.rows), cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("layernorm_forward_cuda");
  });
}

Status layernorm_backward_cuda(const LayerNormBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_layernorm_backward_partials(a));
  return dispatch_float(a.dtype, "layernorm_backward", [&](auto t) {
    using T = decltype(t);
    if (a.rows > 0) layernorm_dx_kernel<T><<<cuda::warp_rows_grid(a.rows), cuda::kBlock, 0, stream>>>(a);
    ZDP_RETURN_IF_ERROR(cuda::check_launch("layernorm_backward_cuda (dx)"));
    const int64_t chunk = layernorm_row_chunk(a.rows), chunks = layernorm_chunks(a.rows);
    const dim3 grid(cuda::blocks_for(a.cols), static_cast<unsigned>(chunks));
    layernorm_dparams_partial_kernel<T><<<grid, cuda::kBlock, 0, stream>>>(a, chunk, chunks);
    ZDP_RETURN_IF_ERROR(cuda::check_launch("layernorm_backward_cuda (dweight, dbias partials)"));
    if (chunks == 1) return Status::Ok();
    layernorm_dparams_final_kernel<T><<<cuda::blocks_for(a.cols), cuda::kBlock, 0, stream>>>(a, chunks);
    return cuda::check_launch("layernorm_backward_cuda (dweight, dbias)");
  });
}

}  // namespace zdp::kernels
