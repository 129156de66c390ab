// bias_grad_cuda: the CUDA launcher of kernels/bias_grad.h. Block (32, kBiasGradLanes):
// x picks 8 columns (one 16-byte load per row where dy's rows allow, else 1 column), y the
// lane; grid (column ranges, chunks). The lanes' sums meet in shared memory and lane 0
// adds them in lane order; a second kernel adds the chunks' sums in chunk order.
#include "kernels/bias_grad.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels {
namespace {

constexpr int kColLanes = 32;

template <typename T, int N>
__global__ void __launch_bounds__(kColLanes * kBiasGradLanes) bias_grad_partial_kernel(BiasGradArgs a, int64_t chunk,
                                                                                        int64_t chunks) {
  __shared__ float lanes[kBiasGradLanes][kColLanes * 8];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColLanes + threadIdx.x) * N;
  const int64_t k = blockIdx.y;
  const int64_t r0 = k * chunk, r1 = min(a.rows, r0 + chunk);
  const T* dy = static_cast<const T*>(a.dy);
  float acc[8] = {};
  if (c0 < a.cols) {
    float v[8];
#pragma unroll 4  // several rows' loads in flight; the adds stay in row order
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kBiasGradLanes) {
      cuda::load_n<N>(dy + r * a.cols + c0, v);
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) lanes[threadIdx.y][threadIdx.x * N + i] = acc[i];
  __syncthreads();
  if (threadIdx.y != 0 || c0 >= a.cols) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = lanes[0][threadIdx.x * N + i];
#pragma unroll
    for (int l = 1; l < kBiasGradLanes; ++l) s += lanes[l][threadIdx.x * N + i];
    acc[i] = s;
  }
  // Element stores: db (a parameter's gradient in the engine's layout) may lie at any
  // element offset, and these are a row's worth of stores against rows x cols loads.
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (chunks == 1) static_cast<T*>(a.db)[c0 + i] = from_f32<T>(acc[i]);
    else a.partials[k * a.cols + c0 + i] = acc[i];
  }
}

template <typename T>
__global__ void bias_grad_final_kernel(BiasGradArgs a, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.cols) return;
  float s = a.partials[c];
#pragma unroll 8  // the loads in flight together; the adds stay in chunk order
  for (int64_t k = 1; k < chunks; ++k) s += a.partials[k * a.cols + c];
  static_cast<T*>(a.db)[c] = from_f32<T>(s);
}

}  // namespace

Status bias_grad_cuda(const BiasGradArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_bias_grad(a));
  if (a.cols == 0) return Status::Ok();
  const int64_t chunk = bias_grad_row_chunk(a.rows), chunks = bias_grad_chunks(a.rows);
  if (chunks > 1 && a.partials == nullptr) {
    return Status(StatusCode::kInvalidArgument, "bias_grad_cuda: " + std::to_string(chunks) +
                                                    " chunks need bias_grad_partials_floats(rows, cols) of scratch");
  }
  const bool vec = a.cols % 8 == 0 && cuda::aligned16(a.dy);
  return dispatch_float(a.dtype, "bias_grad", [&](auto t) {
    using T = decltype(t);
    const dim3 block(kColLanes, kBiasGradLanes);
    const int64_t per_block = kColLanes * (vec ? 8 : 1);
    const dim3 grid(static_cast<unsigned>((a.cols + per_block - 1) / per_block), static_cast<unsigned>(chunks));
    if (vec) bias_grad_partial_kernel<T, 8><<<grid, block, 0, stream>>>(a, chunk, chunks);
    else bias_grad_partial_kernel<T, 1><<<grid, block, 0, stream>>>(a, chunk, chunks);
    ZDP_RETURN_IF_ERROR(cuda::check_launch("bias_grad_cuda (chunks)"));
    if (chunks == 1) return Status::Ok();
    bias_grad_final_kernel<T><<<cuda::blocks_for(a.cols), cuda::kBlock, 0, stream>>>(a, chunks);
    return cuda::check_launch("bias_grad_cuda (sum of the chunks)");
  });
}

}  // namespace zdp::kernels
