// The CUDA launchers of kernels/quantize.h: one thread block per quantization block for
// the quantizer (the block maximum is a shared-memory maximum over the magnitudes' bits,
// as on the CPU), grid-stride loops for the dequantizers. Same per-element math as the CPU.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/quantize.h"

namespace zdp::kernels {
namespace {

static_assert(kQuantBlock == 256, "one thread per element of a quantization block");

Status launched(const char* what) { return cuda::check_launch(what); }

int grid_for(int64_t count) {
  const int64_t blocks = (count + 255) / 256;
  return static_cast<int>(blocks < 4096 ? blocks : 4096);
}

template <typename I>
__global__ void quantize_kernel(const I* in, float* err, int64_t count, int bits, float* scales, uint8_t* codes) {
  __shared__ uint32_t amax_bits;
  __shared__ int8_t q[kQuantBlock];
  const int64_t blk = blockIdx.x;
  const int t = threadIdx.x;
  const int64_t k = blk * kQuantBlock + t;
  const bool live = k < count;
  if (t == 0) amax_bits = 0;
  __syncthreads();
  const float v = live ? to_f32(in[k]) + (err != nullptr ? err[k] : 0.0f) : 0.0f;
  if (live) atomicMax(&amax_bits, float_bits(v) & 0x7fffffffu);
  __syncthreads();
  const float scale = quant_scale(bits_float(amax_bits), bits);
  if (t == 0) scales[blk] = scale;
  const int code = live ? quant_code(v, scale, bits) : 0;
  if (live && err != nullptr) err[k] = quant_residual(v, quant_value(code, scale));
  if (bits == 8) {
    if (live) codes[k] = static_cast<uint8_t>(static_cast<int8_t>(code));
    return;
  }
  q[t] = static_cast<int8_t>(code);
  __syncthreads();
  if ((t & 1) == 0 && live) {
    codes[k / 2] = static_cast<uint8_t>((q[t] + 8) | ((q[t + 1] + 8) << 4));  // q[t + 1] is 0 past the end
  }
}

__device__ int code_at(const uint8_t* codes, int64_t k, int bits) {
  if (bits == 8) return static_cast<int8_t>(codes[k]);
  return static_cast<int>((codes[k / 2] >> ((k & 1) * 4)) & 0xf) - 8;
}

__device__ const uint8_t* codes_of(const char* chunk, int64_t count) {
  return reinterpret_cast<const uint8_t*>(chunk) + 4 * ((count + kQuantBlock - 1) / kQuantBlock);
}

__global__ void dequant_sum_kernel(DequantSumArgs a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < a.count; k += stride) {
    float sum = (a.accumulate ? a.out[k] : 0.0f) + (a.own != nullptr ? a.own[k] : 0.0f);
    for (int c = 0; c < a.chunks; ++c) {
      if (c == a.skip) continue;
      const char* chunk = static_cast<const char*>(a.in) + c * a.chunk_stride;
      const float* scales = reinterpret_cast<const float*>(chunk);
      sum = sum + quant_value(code_at(codes_of(chunk, a.count), k, a.bits), scales[k / kQuantBlock]);
    }
    a.out[k] = sum;
  }
}

template <typename O>
__global__ void dequantize_kernel(const char* in, int64_t chunk_stride, int chunks, int64_t count, int bits, O* out) {
  const int64_t total = count * chunks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t c = i / count, k = i % count;
    const char* chunk = in + c * chunk_stride;
    const float* scales = reinterpret_cast<const float*>(chunk);
    out[i] = from_f32<O>(quant_value(code_at(codes_of(chunk, count), k, bits), scales[k / kQuantBlock]));
  }
}

}  // namespace

Status quantize_cuda(const QuantizeArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_quantize_args(a));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.in_dtype, "quantize input", [&](auto i) {
    using I = decltype(i);
    const int64_t blocks = (a.count + kQuantBlock - 1) / kQuantBlock;
    float* scales = static_cast<float*>(a.out);
    uint8_t* codes = static_cast<uint8_t*>(a.out) + 4 * blocks;
    quantize_kernel<I><<<static_cast<unsigned>(blocks), kQuantBlock, 0, stream>>>(static_cast<const I*>(a.in), a.error,
                                                                                  a.count, a.bits, scales, codes);
    return launched("quantize_cuda");
  });
}

Status dequant_sum_cuda(const DequantSumArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_dequant_sum_args(a));
  if (a.count == 0) return Status::Ok();
  dequant_sum_kernel<<<grid_for(a.count), 256, 0, stream>>>(a);
  return launched("dequant_sum_cuda");
}

Status dequantize_cuda(const DequantizeArgs& a, cudaStream_t stream) {
  ZDP_RETURN_IF_ERROR(check_dequantize_args(a));
  if (a.count == 0 || a.chunks == 0) return Status::Ok();
  return dispatch_float(a.out_dtype, "dequantize output", [&](auto o) {
    using O = decltype(o);
    dequantize_kernel<O><<<grid_for(a.count * a.chunks), 256, 0, stream>>>(
        static_cast<const char*>(a.in), a.chunk_stride, a.chunks, a.count, a.bits, static_cast<O*>(a.out));
    return launched("dequantize_cuda");
  });
}

}  // namespace zdp::kernels
