// Embeddings on the GPU: one thread per output element; the backward sums each dwte
// element over its token's positions (the host-built index) and each dwpe element over
// the batch, in order: deterministic, no atomics.
#include "kernels/cuda/common.cuh"
#include "kernels/embedding.h"

namespace zdp::kernels {
namespace {

template <typename T>
__global__ void embedding_kernel(EmbeddingArgs a) {
  const T* wte = static_cast<const T*>(a.wte);
  const T* wpe = static_cast<const T*>(a.wpe);
  T* out = static_cast<T*>(a.out);
  const int64_t total = a.batch * a.seq * a.dim;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / a.dim, c = i % a.dim;
    out[i] = from_f32<T>(to_f32(wte[static_cast<int64_t>(a.tokens[n]) * a.dim + c]) + to_f32(wpe[(n % a.seq) * a.dim + c]));
  }
}

template <typename T>
__global__ void embedding_backward_kernel(EmbeddingBackwardArgs a) {
  const T* dout = static_cast<const T*>(a.dout);
  const int64_t wte_items = a.vocab * a.dim, total = wte_items + a.seq * a.dim;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < wte_items) {
      const int64_t v = i / a.dim, c = i % a.dim;
      float s = a.dwte_base ? a.dwte_base[i] : 0.0f;
      for (int32_t k = a.offsets[v]; k < a.offsets[v + 1]; ++k) s += to_f32(dout[static_cast<int64_t>(a.order[k]) * a.dim + c]);
      static_cast<T*>(a.dwte)[i] = from_f32<T>(s);
    } else {
      const int64_t j = i - wte_items, t = j / a.dim, c = j % a.dim;
      float s = 0.0f;
      for (int64_t b = 0; b < a.batch; ++b) s += to_f32(dout[(b * a.seq + t) * a.dim + c]);
      static_cast<T*>(a.dwpe)[j] = from_f32<T>(s);
    }
  }
}

}  // namespace

Status embedding_forward_cuda(const EmbeddingArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_embedding(a));
  if (a.batch == 0) return Status::Ok();
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for(a.batch * a.seq * a.dim));
  return dispatch_float(a.dtype, "embedding", [&](auto t) {
    embedding_kernel<decltype(t)><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("embedding_forward_cuda");
  });
}

Status embedding_backward_cuda(const EmbeddingBackwardArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_embedding_backward(a));
  ZDP_ASSIGN_OR_RETURN(const int grid, cuda::grid_for((a.vocab + a.seq) * a.dim));
  return dispatch_float(a.dtype, "embedding_backward", [&](auto t) {
    embedding_backward_kernel<decltype(t)><<<grid, cuda::kBlock, 0, stream>>>(a);
    return cuda::check_launch("embedding_backward_cuda");
  });
}

}  // namespace zdp::kernels
