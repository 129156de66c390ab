// Block quantization for compressed collectives (zero.reduce_dtype / zero.gather_dtype =
// "int8" or "int4"): values travel as blocks of kQuantBlock codes with one fp32 scale
// each (symmetric, scale = max|x| / qmax, codes rounded to nearest even), so a block's
// error is at most half a step of its own largest value. Error feedback: the quantizer
// adds an fp32 error buffer to its input and stores back what the codes lost, so the
// error of one step is sent with the next one and nothing is lost over time.
// Same math on the CPU and the GPU (no FMA contraction, IEEE division): the bits agree.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.h"

namespace zdp::kernels {

// Elements per scale: small enough that one outlier costs only its block's precision,
// large enough that the scale adds 1.6% (int8) or 3.1% (int4) to the codes.
inline constexpr int64_t kQuantBlock = 256;

// The largest code of a `bits`-bit symmetric quantizer: 127 or 7.
ZDP_HD int quant_max(int bits) { return bits == 8 ? 127 : 7; }

// One chunk of `count` values on the wire: ceil(count / kQuantBlock) fp32 scales, then the
// codes (one byte each for int8, two per byte for int4, low nibble first, stored + 8),
// padded to 16 bytes so that consecutive chunks stay aligned.
int64_t quant_chunk_bytes(int64_t count, int bits);

// The scale of a block whose largest magnitude is `amax`; non-finite when amax is (so a
// NaN or infinite gradient stays non-finite after dequantization and the step is skipped).
ZDP_HD float quant_scale(float amax, int bits) { return amax / static_cast<float>(quant_max(bits)); }

// The code of `v` in a block of scale `scale` (0 for a zero or non-finite scale).
ZDP_HD int quant_code(float v, float scale, int bits) {
  if (!(scale > 0.0f) || !(scale < INFINITY)) return 0;
  const float q = rintf(v / scale);
  const float m = static_cast<float>(quant_max(bits));
  return static_cast<int>(q > m ? m : (q < -m ? -m : q));
}

// The value code `q` stands for: q x scale (NaN for a non-finite scale).
ZDP_HD float quant_value(int q, float scale) {
  return (scale < INFINITY) ? static_cast<float>(q) * scale : NAN;
}

// What the quantizer keeps for the next step: v minus what the codes carry, or 0 when v
// or its block is not finite (that step is skipped; a NaN must not poison later steps).
ZDP_HD float quant_residual(float v, float sent) {
  const float r = v - sent;
  return (r - r == 0.0f) ? r : 0.0f;
}

struct QuantizeArgs {
  const void* in = nullptr;  // `count` values (fp32, bf16 or fp16)
  DType in_dtype = DType::kF32;
  float* error = nullptr;    // error feedback: added to `in`, then holds the new residual; or nullptr
  int64_t count = 0;
  int bits = 8;              // 8 or 4
  void* out = nullptr;       // quant_chunk_bytes(count, bits) bytes
};

// Sums `chunks` quantized chunks (chunk c at in + c x chunk_stride bytes, `count` values
// each) in fp32, in rank order: out = [out] + own + sum over c != skip of dequant(chunk c).
struct DequantSumArgs {
  const void* in = nullptr;
  int64_t chunk_stride = 0;  // bytes between chunks (>= quant_chunk_bytes(count, bits), a multiple of 16)
  int chunks = 0;
  int skip = -1;             // the chunk not read (this rank's own, taken exactly from `own`)
  const float* own = nullptr;  // added unquantized, or nullptr; may alias out unless accumulate
  float* out = nullptr;
  bool accumulate = false;   // add into out's current values instead of overwriting them
  int64_t count = 0;
  int bits = 8;
};

// Decodes `chunks` quantized chunks into consecutive runs of `count` values of out_dtype
// (the gathered parameters: chunk c lands at out + c x count elements).
struct DequantizeArgs {
  const void* in = nullptr;
  int64_t chunk_stride = 0;
  int chunks = 1;
  int64_t count = 0;
  int bits = 8;
  void* out = nullptr;
  DType out_dtype = DType::kF32;
};

Status quantize_cpu(const QuantizeArgs& args);
Status dequant_sum_cpu(const DequantSumArgs& args);
Status dequantize_cpu(const DequantizeArgs& args);
// Enqueue on `stream`; kUnavailable in builds without CUDA.
Status quantize_cuda(const QuantizeArgs& args, cudaStream_t stream);
Status dequant_sum_cuda(const DequantSumArgs& args, cudaStream_t stream);
Status dequantize_cuda(const DequantizeArgs& args, cudaStream_t stream);
// Shared argument checks.
Status check_quantize_args(const QuantizeArgs& args);
Status check_dequant_sum_args(const DequantSumArgs& args);
Status check_dequantize_args(const DequantizeArgs& args);

}  // namespace zdp::kernels
