// bias_grad_cuda: the CUDA launcher of kernels/bias_grad.h, the column sums of
// kernels/cuda/column_sum.cuh: block (32, kColumnSumLanes), x picks 8 columns (one
// 16-byte load per row where dy's rows allow, else 1 column), y the lane; grid (column
// ranges, chunks); a second kernel adds the chunks' sums in chunk order.
#include "kernels/bias_grad.h"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/common.cuh"

namespace zdp::kernels {
namespace {

template <typename T, int N>
__global__ void __launch_bounds__(cuda::kColumnSumColLanes * kColumnSumLanes)
    bias_grad_partial_kernel(BiasGradArgs a, int64_t chunk, int64_t chunks) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * cuda::kColumnSumColLanes + threadIdx.x) * N;
  const int64_t k = blockIdx.y;
  const T* dy = static_cast<const T*>(a.dy);
  const auto terms = [&](int64_t r, int64_t c, float (&t)[1][8]) { cuda::load_n<N>(dy + r * a.cols + c, t[0]); };
  float acc[1][8];
  if (!cuda::chunk_column_sums<1, N>(terms, k * chunk, min(a.rows, (k + 1) * chunk), c0, a.cols, acc)) return;
  // Element stores: db (a parameter's gradient in the engine's layout) may lie at any
  // element offset, and these are a row's worth of stores against rows x cols loads.
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (chunks == 1) static_cast<T*>(a.db)[c0 + i] = from_f32<T>(acc[0][i]);
    else a.partials[k * a.cols + c0 + i] = acc[0][i];
  }
}

template <typename T>
__global__ void bias_grad_final_kernel(BiasGradArgs a, int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.cols) return;
  static_cast<T*>(a.db)[c] = from_f32<T>(cuda::sum_of_chunks(a.partials, chunks, a.cols, c));
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
    const dim3 block(cuda::kColumnSumColLanes, kColumnSumLanes);
    const int64_t per_block = cuda::kColumnSumColLanes * (vec ? 8 : 1);
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
