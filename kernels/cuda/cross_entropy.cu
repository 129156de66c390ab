// Fused softmax cross-entropy on the GPU: one block per row (vocabularies of 50k).
// Targets are not range-checked on the device (the CPU twin does, and the trainer checks
// tokens on the host when it reads them).
#include "kernels/cross_entropy.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels {
namespace {

constexpr int kRowBlock = 512;

template <typename T>
__global__ void __launch_bounds__(kRowBlock) cross_entropy_kernel(CrossEntropyArgs a) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const T* l = static_cast<const T*>(a.logits) + r * a.vocab;
  float m = -3.0e38f;
  for (int64_t j = threadIdx.x; j < a.vocab; j += blockDim.x) m = fmaxf(m, to_f32(l[j]));
  m = cuda::block_reduce<true>(m, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < a.vocab; j += blockDim.x) sum += exp_branchless(to_f32(l[j]) - m);
  sum = cuda::block_reduce<false>(sum, shared);
  const int32_t target = a.targets[r];
  if (threadIdx.x == 0) a.losses[r] = logf(sum) + m - to_f32(l[target]);
  if (a.dlogits == nullptr) return;
  __syncthreads();  // every thread read its logits before any is overwritten (dlogits may alias)
  const float inv = 1.0f / sum;
  T* d = static_cast<T*>(a.dlogits) + r * a.vocab;
  for (int64_t j = threadIdx.x; j < a.vocab; j += blockDim.x) {
    d[j] = from_f32<T>(cross_entropy_dlogit(to_f32(l[j]), m, inv, j == target, a.grad_scale));
  }
}

}  // namespace

Status cross_entropy_cuda(const CrossEntropyArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_cross_entropy(a));
  if (a.rows == 0) return Status::Ok();
  if (a.rows > 0x7fffffff) return Status(StatusCode::kInvalidArgument, "cross_entropy_cuda: too many rows");
  return dispatch_float(a.dtype, "cross_entropy", [&](auto t) {
    cross_entropy_kernel<decltype(t)><<<static_cast<unsigned>(a.rows), kRowBlock, 0, stream>>>(a);
    return cuda::check_launch("cross_entropy_cuda");
  });
}

}  // namespace zdp::kernels
