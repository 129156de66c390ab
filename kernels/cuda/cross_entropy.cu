// Fused softmax cross-entropy on the GPU: one block per row (vocabularies of 50k), the
// logits' gradient written once, over the logits; 16-byte loads where the rows allow.
// The exponentials are the special-function unit's (cuda::exp_sfu, within (2.5 + 1.25 |x|)
// ulp), not the CPU twin's exp_branchless: per element the rest is the twin's arithmetic.
// Targets are not range-checked on the device (the CPU twin does, and the trainer checks
// tokens on the host when it reads them).
#include "kernels/cross_entropy.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_common.cuh"

namespace zdp::kernels {
namespace {

constexpr int kRowBlock = 512;

// N = 8: each thread takes 8 consecutive logits per step through 16-byte loads and
// stores (vocab a multiple of 8, aligned rows); N = 1 otherwise.
template <typename T, int N>
__global__ void __launch_bounds__(kRowBlock) cross_entropy_kernel(CrossEntropyArgs a) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const T* l = static_cast<const T*>(a.logits) + r * a.vocab;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * N, step = static_cast<int64_t>(blockDim.x) * N;
  float v[8];
  float m = -3.0e38f;
  for (int64_t j = first; j < a.vocab; j += step) {
    cuda::load_n<N>(l + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
  }
  m = cuda::block_reduce<true>(m, shared);
  float sum = 0.0f;
  for (int64_t j = first; j < a.vocab; j += step) {
    cuda::load_n<N>(l + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) sum += cuda::exp_sfu(v[k] - m);
  }
  sum = cuda::block_reduce<false>(sum, shared);
  const int32_t target = a.targets[r];
  if (threadIdx.x == 0) a.losses[r] = logf(sum) + m - to_f32(l[target]);
  if (a.dlogits == nullptr) return;
  __syncthreads();  // every thread read its logits before any is overwritten (dlogits may alias)
  const float inv = 1.0f / sum;
  T* d = static_cast<T*>(a.dlogits) + r * a.vocab;
  for (int64_t j = first; j < a.vocab; j += step) {
    cuda::load_n<N>(l + j, v);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[k] = cross_entropy_dlogit_from_exp(cuda::exp_sfu(v[k] - m), inv, j + k == target, a.grad_scale);
    }
    cuda::store_n<N>(d + j, v);
  }
}

// The vector path for rows whose fp32 values fit in shared memory (GPT-2's 50,304 take
// 197 KiB): the max's pass reads the logits from global memory once and keeps them there
// in fp32; the sum's pass replaces each by e = exp(v - m); the gradient's pass reads e back
// instead of reading the logits again and recomputing the exponential, the kernel's
// costliest instructions. Per element the arithmetic is cross_entropy_kernel's; over 1024
// threads a row (the sum's order is theirs): one such block fits an SM, so it brings the
// warps, and the unrolled loops the loads in flight, that four blocks of 512 did.
// On an H200 (stop 26) the version that read the logits twice and tested every element
// for the target ran at 2.65 ms a call for 16k x 50k bf16 logits: by its SASS, 53
// instructions an element, 18 of them in the gradient's pass (bf16 rounding in integer
// instructions, the target test) and 30 in the exponentials' (exp_branchless); here that
// pass rounds in hardware (store_n) and looks for the target once per 8 elements, and
// exp_sfu takes the exponentials' pass to 5.5 (SASS, sm_90: 18.4 in all).
constexpr int kCachedBlock = 1024;
template <typename T>
__global__ void __launch_bounds__(kCachedBlock) cross_entropy_cached_exp_kernel(CrossEntropyArgs a) {
  extern __shared__ float4 row4[];  // the row: its logits in fp32, then their exponentials
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const T* l = static_cast<const T*>(a.logits) + r * a.vocab;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * 8, step = static_cast<int64_t>(blockDim.x) * 8;
  // Each thread reads back only the 8-element groups it wrote: no barrier between passes
  // beyond the block reductions'. A group's first four values are at row4[g], its last
  // four at row4[vocab / 8 + g] (g = j / 8): 8 threads' float4 accesses (one shared-memory
  // pass) then fall on 8 consecutive float4s, all 32 banks once. Kept side by side
  // (row4[2g], row4[2g + 1]) the 8 threads spanned 256 bytes, two to a bank: every access
  // took two passes.
  const int64_t second_half = a.vocab / 8;
  auto read8 = [&](int64_t j, float (&v)[8]) {
    const float4 p = row4[j / 8], q = row4[second_half + j / 8];
    v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w, v[4] = q.x, v[5] = q.y, v[6] = q.z, v[7] = q.w;
  };
  auto write8 = [&](int64_t j, const float (&v)[8]) {
    row4[j / 8] = make_float4(v[0], v[1], v[2], v[3]);
    row4[second_half + j / 8] = make_float4(v[4], v[5], v[6], v[7]);
  };
  float v[8];
  float m = -3.0e38f;
#pragma unroll 4
  for (int64_t j = first; j < a.vocab; j += step) {
    cuda::load_n<8>(l + j, v);
    write8(j, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) m = fmaxf(m, v[k]);
  }
  m = cuda::block_reduce<true>(m, shared);
  float sum = 0.0f;
#pragma unroll 2
  for (int64_t j = first; j < a.vocab; j += step) {
    read8(j, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      v[k] = cuda::exp_sfu(v[k] - m);
      sum += v[k];
    }
    write8(j, v);
  }
  sum = cuda::block_reduce<false>(sum, shared);
  const int32_t target = a.targets[r];
  if (threadIdx.x == 0) a.losses[r] = logf(sum) + m - to_f32(l[target]);
  if (a.dlogits == nullptr) return;
  __syncthreads();  // thread 0 read the target's logit before any is overwritten (dlogits may alias)
  const float inv = 1.0f / sum;
  T* d = static_cast<T*>(a.dlogits) + r * a.vocab;
  for (int64_t j = first; j < a.vocab; j += step) {
    read8(j, v);
    float g[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = cross_entropy_dlogit_from_exp(v[k], inv, false, a.grad_scale);
    const int64_t t = target - j;  // the target's place among these 8, when it is one of them
    if (t >= 0 && t < 8) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k == t) g[k] = cross_entropy_dlogit_from_exp(v[k], inv, true, a.grad_scale);
      }
    }
    cuda::store_n<8>(d + j, g);
  }
}

// Whether `bytes` of dynamic shared memory fit what one block may opt in to on the current
// device, with the reduction's 128 bytes (then raised for the kernel).
template <typename T>
StatusOr<bool> exponentials_fit_in_shared(int64_t bytes) {
  int device = 0, optin = 0;
  ZDP_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  ZDP_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes + 128 > optin) return false;
  ZDP_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(cross_entropy_cached_exp_kernel<T>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

}  // namespace

Status cross_entropy_cuda(const CrossEntropyArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_cross_entropy(a));
  if (a.rows == 0) return Status::Ok();
  if (a.rows > 0x7fffffff) return Status(StatusCode::kInvalidArgument, "cross_entropy_cuda: too many rows");
  const bool vec = a.vocab % 8 == 0 && cuda::aligned16(a.logits) && (a.dlogits == nullptr || cuda::aligned16(a.dlogits));
  return dispatch_float(a.dtype, "cross_entropy", [&](auto t) {
    using T = decltype(t);
    const int64_t exp_bytes = a.vocab * static_cast<int64_t>(sizeof(float));
    bool cached = false;
    if (vec) {
      ZDP_ASSIGN_OR_RETURN(cached, exponentials_fit_in_shared<T>(exp_bytes));
    }
    if (cached) {
      cross_entropy_cached_exp_kernel<T>
          <<<static_cast<unsigned>(a.rows), kCachedBlock, static_cast<size_t>(exp_bytes), stream>>>(a);
    } else if (vec) {
      cross_entropy_kernel<T, 8><<<static_cast<unsigned>(a.rows), kRowBlock, 0, stream>>>(a);
    } else {
      cross_entropy_kernel<T, 1><<<static_cast<unsigned>(a.rows), kRowBlock, 0, stream>>>(a);
    }
    return cuda::check_launch("cross_entropy_cuda");
  });
}

}  // namespace zdp::kernels
