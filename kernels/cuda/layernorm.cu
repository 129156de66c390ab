// LayerNorm on the GPU: one warp per row for the forward and for dx (warp-shuffle sums),
// 16-byte loads and stores where the rows allow (cols a multiple of 8, aligned pointers).
// dweight/dbias in two passes, deterministic and without atomics (layernorm.h): the
// column sums of kernels/cuda/column_sum.cuh, a block per (256 columns, chunk of rows),
// 8 lanes of rows each, 16-byte loads; then one thread per column summing the chunks in
// order. For gpt2-124m (16,384 rows, d = 768): 384 blocks of 256 threads.
#include <type_traits>

#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"
#include "kernels/layernorm.h"

namespace zdp::kernels {
namespace {

// A warp walks its row N elements per lane and step (N = 8: 16-byte loads, 256 elements
// a step; N = 1: 32), so the lanes' partial sums, and the warp sum of them, differ from
// the CPU's sequential sums by order only (layer_kernels_gpu_test's bound).
//
// K > 0: the lane's chunks of the row (at most K, so cols <= 32 N K) stay in registers
// between the passes, and all of a pass's loads are issued before its arithmetic; K = 0:
// each pass reads the row again (from L1/L2), one chunk at a time. The arithmetic and its
// order are the same either way. Why: at d = 768 the cols are a runtime value, so each
// pass's loop was not unrolled and a warp had one 16-byte load per input in flight; on an
// H200 (stop 26) the forward moved 2.1 TB/s and dx was part of a backward at 27% of HBM.
//
// for_lane_chunks calls fn(slot, c) for the lane's chunks c = lane N + i 32 N < cols in
// order, slot = i when K > 0 (a compile-time register slot once unrolled), 0 otherwise.
template <int K, int N, typename Fn>
__device__ __forceinline__ void for_lane_chunks(int64_t cols, int lane, Fn&& fn) {
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int64_t c = static_cast<int64_t>(lane) * N + static_cast<int64_t>(i) * 32 * N;
      if (c < cols) fn(i, c);
    }
  } else {
    for (int64_t c = static_cast<int64_t>(lane) * N; c < cols; c += 32 * N) fn(0, c);
  }
}
template <int K>
inline constexpr int kSlots = K > 0 ? K : 1;  // register slots of a chunk cache (1: scratch)

template <typename T, int N, int K>
__global__ void layernorm_forward_kernel(LayerNormArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.rows) return;
  const int64_t C = a.cols;
  const T* x = static_cast<const T*>(a.x) + row * C;
  float v[kSlots<K>][8];
  float sum = 0.0f;
  if (a.residual != nullptr) {
    // The residual add, stored rounded to T; the lane re-reads only what it wrote itself.
    const T* res = static_cast<const T*>(a.residual) + row * C;
    T* out = static_cast<T*>(a.sum) + row * C;
    // With registers, every chunk's loads go out before any arithmetic or store (a store to
    // `out`, which may be x itself, would keep the next chunk's loads behind it).
    float rv[kSlots<K>][8];
    const auto load = [&](int i, int64_t c) {
      cuda::load_n<N>(x + c, v[i]);
      cuda::load_n<N>(res + c, rv[i]);
    };
    const auto add_store_and_sum = [&](int i, int64_t c) {
      if constexpr (K == 0) load(i, c);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        v[i][k] = to_f32(from_f32<T>(v[i][k] + rv[i][k]));
        sum += v[i][k];
      }
      cuda::store_n<N>(out + c, v[i]);
    };
    if constexpr (K > 0) for_lane_chunks<K, N>(C, lane, load);
    for_lane_chunks<K, N>(C, lane, add_store_and_sum);
    x = out;
  } else {
    for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) { cuda::load_n<N>(x + c, v[i]); });
    for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
      if constexpr (K == 0) cuda::load_n<N>(x + c, v[i]);
#pragma unroll
      for (int k = 0; k < N; ++k) sum += v[i][k];
    });
  }
  const float mean = cuda::warp_sum(sum) / static_cast<float>(C);
  float var = 0.0f;
  for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
    if constexpr (K == 0) cuda::load_n<N>(x + c, v[i]);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float d = v[i][k] - mean;
      var += d * d;
    }
  });
  const float rstd = 1.0f / sqrtf(cuda::warp_sum(var) / static_cast<float>(C) + a.eps);
  const T* w = static_cast<const T*>(a.weight);
  const T* b = static_cast<const T*>(a.bias);
  T* y = static_cast<T*>(a.y) + row * C;
  for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
    float wv[8], bv[8];
    if constexpr (K == 0) cuda::load_n<N>(x + c, v[i]);
    cuda::load_n<N>(w + c, wv);
    cuda::load_n<N>(b + c, bv);
#pragma unroll
    for (int k = 0; k < N; ++k) v[i][k] = layernorm_y(layernorm_xhat(v[i][k], mean, rstd), wv[k], bv[k]);
    cuda::store_n<N>(y + c, v[i]);
  });
  if (lane == 0) {
    a.mean[row] = mean;
    a.rstd[row] = rstd;
  }
}

template <typename T, int N, int K>
__global__ void layernorm_dx_kernel(LayerNormBackwardArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.rows) return;
  const int64_t C = a.cols;
  const T* dy = static_cast<const T*>(a.dy) + row * C;
  const T* x = static_cast<const T*>(a.x) + row * C;
  const T* w = static_cast<const T*>(a.weight);
  const float mean = a.mean[row], rstd = a.rstd[row];
  float gv[kSlots<K>][8], xv[kSlots<K>][8];
  float sum_g = 0.0f, sum_gx = 0.0f;
  if constexpr (K > 0) {
    for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
      cuda::load_n<N>(dy + c, gv[i]);
      cuda::load_n<N>(x + c, xv[i]);
    });
  }
  for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
    float wv[8];
    if constexpr (K == 0) {
      cuda::load_n<N>(dy + c, gv[i]);
      cuda::load_n<N>(x + c, xv[i]);
    }
    cuda::load_n<N>(w + c, wv);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float g = gv[i][k] * wv[k];
      sum_g += g;
      sum_gx += g * layernorm_xhat(xv[i][k], mean, rstd);
    }
  });
  const float inv_c = 1.0f / static_cast<float>(C);  // times 1/C, as the CPU twin (not / C: other bits)
  const float mean_g = cuda::warp_sum(sum_g) * inv_c;
  const float mean_gx = cuda::warp_sum(sum_gx) * inv_c;
  T* dx = static_cast<T*>(a.dx) + row * C;
  for_lane_chunks<K, N>(C, lane, [&](int i, int64_t c) {
    float wv[8], prior[8] = {}, d[8];
    if constexpr (K == 0) {
      cuda::load_n<N>(dy + c, gv[i]);
      cuda::load_n<N>(x + c, xv[i]);
    }
    cuda::load_n<N>(w + c, wv);
    if (a.dx_mode == OutputMode::kAccumulate) cuda::load_n<N>(dx + c, prior);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      d[k] = layernorm_dx(gv[i][k] * wv[k], layernorm_xhat(xv[i][k], mean, rstd), mean_g, mean_gx, rstd);
      if (a.dx_mode == OutputMode::kAccumulate) d[k] += prior[k];
    }
    cuda::store_n<N>(dx + c, d);
  });
}

// Calls launch(N, K) with N, K as std::integral_constant: the vector path (N = 8) with K
// register slots, the fewest chunks of 256 that hold the row (at least 2, at most 4:
// cols <= 1024), or K = 0 past that; the scalar path (N = 1, K = 0) otherwise.
template <typename Launch>
void with_row_kernel(bool vec, int64_t cols, Launch&& launch) {
  using std::integral_constant;
  const int64_t chunks = (cols + 255) / 256;
  if (!vec) launch(integral_constant<int, 1>{}, integral_constant<int, 0>{});
  else if (chunks <= 2) launch(integral_constant<int, 8>{}, integral_constant<int, 2>{});
  else if (chunks == 3) launch(integral_constant<int, 8>{}, integral_constant<int, 3>{});
  else if (chunks == 4) launch(integral_constant<int, 8>{}, integral_constant<int, 4>{});
  else launch(integral_constant<int, 8>{}, integral_constant<int, 0>{});
}

// Rows of 8k elements at 16-byte aligned addresses take the vector path.
template <typename... Ptrs>
bool vector_rows(int64_t cols, const Ptrs*... ptrs) {
  return cols % 8 == 0 && cuda::aligned16(ptrs...);
}

// dweight's and dbias's column sums of one chunk of rows (kernels/cuda/column_sum.cuh):
// the terms dy * xhat and dy, from one read of each row's dy and x.
template <typename T, int N>
__global__ void __launch_bounds__(cuda::kColumnSumColLanes * kColumnSumLanes)
    layernorm_dparams_partial_kernel(LayerNormBackwardArgs a, int64_t chunk, int64_t chunks) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * cuda::kColumnSumColLanes + threadIdx.x) * N;
  const int64_t k = blockIdx.y;
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  const auto terms = [&](int64_t r, int64_t c, float (&t)[2][8]) {
    float xv[8];
    cuda::load_n<N>(dy + r * a.cols + c, t[1]);
    cuda::load_n<N>(x + r * a.cols + c, xv);
    const float mean = a.mean[r], rstd = a.rstd[r];
#pragma unroll
    for (int i = 0; i < N; ++i) t[0][i] = t[1][i] * layernorm_xhat(xv[i], mean, rstd);
  };
  float acc[2][8];
  if (!cuda::chunk_column_sums<2, N>(terms, k * chunk, min(a.rows, (k + 1) * chunk), c0, a.cols, acc)) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (chunks == 1) {
      static_cast<T*>(a.dweight)[c0 + i] = from_f32<T>(acc[0][i]);
      static_cast<T*>(a.dbias)[c0 + i] = from_f32<T>(acc[1][i]);
    } else {
      a.partials[k * a.cols + c0 + i] = acc[0][i];
      a.partials[(chunks + k) * a.cols + c0 + i] = acc[1][i];
    }
  }
}

template <typename T>
__global__ void layernorm_dparams_final_kernel(LayerNormBackwardArgs a, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.cols) return;
  static_cast<T*>(a.dweight)[c] = from_f32<T>(cuda::sum_of_chunks(a.partials, chunks, a.cols, c));
  static_cast<T*>(a.dbias)[c] = from_f32<T>(cuda::sum_of_chunks(a.partials + chunks * a.cols, chunks, a.cols, c));
}

}  // namespace

Status layernorm_forward_cuda(const LayerNormArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_layernorm(a));
  if (a.rows == 0) return Status::Ok();
  const bool vec = vector_rows(a.cols, a.x, a.weight, a.bias, a.y) &&
                   (a.residual == nullptr || vector_rows(a.cols, a.residual, a.sum));
  return dispatch_float(a.dtype, "layernorm", [&](auto t) {
    using T = decltype(t);
    with_row_kernel(vec, a.cols, [&](auto n, auto k) {
      layernorm_forward_kernel<T, n(), k()><<<cuda::warp_rows_grid(a.rows), cuda::kBlock, 0, stream>>>(a);
    });
    return cuda::check_launch("layernorm_forward_cuda");
  });
}

Status layernorm_backward_cuda(const LayerNormBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_layernorm_backward_partials(a));
  return dispatch_float(a.dtype, "layernorm_backward", [&](auto t) {
    using T = decltype(t);
    if (a.rows > 0) {
      with_row_kernel(vector_rows(a.cols, a.dy, a.x, a.weight, a.dx), a.cols, [&](auto n, auto k) {
        layernorm_dx_kernel<T, n(), k()><<<cuda::warp_rows_grid(a.rows), cuda::kBlock, 0, stream>>>(a);
      });
    }
    ZDP_RETURN_IF_ERROR(cuda::check_launch("layernorm_backward_cuda (dx)"));
    const int64_t chunk = layernorm_row_chunk(a.rows), chunks = layernorm_chunks(a.rows);
    const bool vec = vector_rows(a.cols, a.dy, a.x);
    const int64_t per_block = cuda::kColumnSumColLanes * (vec ? 8 : 1);
    const dim3 grid(static_cast<unsigned>((a.cols + per_block - 1) / per_block), static_cast<unsigned>(chunks));
    const dim3 block(cuda::kColumnSumColLanes, kColumnSumLanes);
    if (vec) layernorm_dparams_partial_kernel<T, 8><<<grid, block, 0, stream>>>(a, chunk, chunks);
    else layernorm_dparams_partial_kernel<T, 1><<<grid, block, 0, stream>>>(a, chunk, chunks);
    ZDP_RETURN_IF_ERROR(cuda::check_launch("layernorm_backward_cuda (dweight, dbias partials)"));
    if (chunks == 1) return Status::Ok();
    layernorm_dparams_final_kernel<T><<<cuda::blocks_for(a.cols), cuda::kBlock, 0, stream>>>(a, chunks);
    return cuda::check_launch("layernorm_backward_cuda (dweight, dbias)");
  });
}

}  // namespace zdp::kernels
