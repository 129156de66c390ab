// quantize_cpu, dequant_sum_cpu, dequantize_cpu and the argument checks of kernels/quantize.h.
// Each quantization block is independent, so blocks are spread over the OpenMP team and
// every inner loop is a plain element loop that -O3 vectorises (the block maximum is an
// unsigned-integer maximum over the magnitudes' bits, which is exact and associative).
#include "kernels/quantize.h"

#include <string>

#include "kernels/cpu_parallel.h"

namespace zdp::kernels {
namespace {

Status invalid(const char* op, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, std::string(op) + ": " + why);
}

Status check_bits(const char* op, int bits) {
  if (bits != 8 && bits != 4) return invalid(op, "bits " + std::to_string(bits) + " is neither 8 nor 4");
  return Status::Ok();
}

int64_t num_blocks(int64_t count) { return (count + kQuantBlock - 1) / kQuantBlock; }
const float* scales_of(const void* chunk) { return static_cast<const float*>(chunk); }
const uint8_t* codes_of(const void* chunk, int64_t count) {
  return static_cast<const uint8_t*>(chunk) + 4 * num_blocks(count);
}

// Quantization blocks per unit of OpenMP work: 64 x 256 values.
constexpr int64_t kBlocksPerTask = 64;

template <typename I>
ZDP_CPU_CLONES void quantize_blocks(const I* in, float* err, int64_t count, int bits, float* scales, uint8_t* codes,
                                    int64_t first, int64_t last) {
  float v[kQuantBlock];
  int8_t q[kQuantBlock];
  for (int64_t blk = first; blk < last; ++blk) {
    const int64_t begin = blk * kQuantBlock;
    const int64_t n = std::min(kQuantBlock, count - begin);
    uint32_t amax_bits = 0;
    for (int64_t k = 0; k < n; ++k) {
      v[k] = to_f32(in[begin + k]) + (err != nullptr ? err[begin + k] : 0.0f);
      const uint32_t b = float_bits(v[k]) & 0x7fffffffu;
      amax_bits = b > amax_bits ? b : amax_bits;
    }
    const float scale = quant_scale(bits_float(amax_bits), bits);
    scales[blk] = scale;
    for (int64_t k = 0; k < n; ++k) q[k] = static_cast<int8_t>(quant_code(v[k], scale, bits));
    if (err != nullptr) {
      for (int64_t k = 0; k < n; ++k) err[begin + k] = quant_residual(v[k], quant_value(q[k], scale));
    }
    if (bits == 8) {
      for (int64_t k = 0; k < n; ++k) codes[begin + k] = static_cast<uint8_t>(q[k]);
    } else {
      uint8_t* dst = codes + begin / 2;  // kQuantBlock is even: a block starts on a byte
      for (int64_t k = 0; k < n; k += 2) {
        const int hi = k + 1 < n ? q[k + 1] : 0;
        dst[k / 2] = static_cast<uint8_t>((q[k] + 8) | ((hi + 8) << 4));
      }
    }
  }
}

// The code of element k of a chunk.
ZDP_CPU_INLINE int code_at(const uint8_t* codes, int64_t k, int bits) {
  if (bits == 8) return static_cast<int8_t>(codes[k]);
  return static_cast<int>((codes[k / 2] >> ((k & 1) * 4)) & 0xf) - 8;
}

ZDP_CPU_CLONES void dequant_sum_range(const DequantSumArgs& a, int64_t begin, int64_t end) {
  // One pass for the first two terms: `own` may alias `out` (read before written).
  for (int64_t k = begin; k < end; ++k) {
    a.out[k] = (a.accumulate ? a.out[k] : 0.0f) + (a.own != nullptr ? a.own[k] : 0.0f);
  }
  for (int c = 0; c < a.chunks; ++c) {
    if (c == a.skip) continue;
    const void* chunk = static_cast<const char*>(a.in) + c * a.chunk_stride;
    const float* scales = scales_of(chunk);
    const uint8_t* codes = codes_of(chunk, a.count);
    for (int64_t k = begin; k < end; ++k) {
      a.out[k] = a.out[k] + quant_value(code_at(codes, k, a.bits), scales[k / kQuantBlock]);
    }
  }
}

}  // namespace

int64_t quant_chunk_bytes(int64_t count, int bits) {
  const int64_t codes = bits == 8 ? count : (count + 1) / 2;
  const int64_t raw = 4 * num_blocks(count) + codes;
  return (raw + 15) / 16 * 16;
}

Status check_quantize_args(const QuantizeArgs& a) {
  ZDP_RETURN_IF_ERROR(check_bits("quantize", a.bits));
  if (a.count < 0) return invalid("quantize", "count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (a.in == nullptr || a.out == nullptr)) return invalid("quantize", "null input or output");
  return Status::Ok();
}

Status check_dequant_sum_args(const DequantSumArgs& a) {
  ZDP_RETURN_IF_ERROR(check_bits("dequant_sum", a.bits));
  if (a.count < 0 || a.chunks < 0) return invalid("dequant_sum", "negative count or chunks");
  if (a.count > 0 && (a.out == nullptr || (a.chunks > 0 && a.in == nullptr))) {
    return invalid("dequant_sum", "null input or output");
  }
  if (a.accumulate && a.own != nullptr && a.own == a.out) {
    return invalid("dequant_sum", "own aliases out while accumulating (it would be counted twice)");
  }
  if (a.chunks > 1 && a.chunk_stride < quant_chunk_bytes(a.count, a.bits)) {
    return invalid("dequant_sum", "chunk stride " + std::to_string(a.chunk_stride) + " bytes is below a chunk's " +
                                      std::to_string(quant_chunk_bytes(a.count, a.bits)));
  }
  if (a.chunks > 1 && a.chunk_stride % 16 != 0) {  // each chunk's fp32 scales: a GPU reads them aligned
    return invalid("dequant_sum", "chunk stride " + std::to_string(a.chunk_stride) + " bytes is not a multiple of 16");
  }
  return Status::Ok();
}

Status check_dequantize_args(const DequantizeArgs& a) {
  ZDP_RETURN_IF_ERROR(check_bits("dequantize", a.bits));
  if (a.count < 0 || a.chunks < 0) return invalid("dequantize", "negative count or chunks");
  if (a.count > 0 && a.chunks > 0 && (a.in == nullptr || a.out == nullptr)) {
    return invalid("dequantize", "null input or output");
  }
  if (a.chunks > 1 && a.chunk_stride < quant_chunk_bytes(a.count, a.bits)) {
    return invalid("dequantize", "chunk stride below a chunk's size");
  }
  if (a.chunks > 1 && a.chunk_stride % 16 != 0) return invalid("dequantize", "chunk stride not a multiple of 16");
  return Status::Ok();
}

Status quantize_cpu(const QuantizeArgs& a) {
  ZDP_RETURN_IF_ERROR(check_quantize_args(a));
  return dispatch_float(a.in_dtype, "quantize input", [&](auto i) {
    using I = decltype(i);
    const I* in = static_cast<const I*>(a.in);
    float* scales = static_cast<float*>(a.out);
    uint8_t* codes = static_cast<uint8_t*>(a.out) + 4 * num_blocks(a.count);
    cpu::parallel_blocks(num_blocks(a.count), kBlocksPerTask, [&](int64_t first, int64_t last) {
      quantize_blocks<I>(in, a.error, a.count, a.bits, scales, codes, first, last);
    });
    return Status::Ok();
  });
}

Status dequant_sum_cpu(const DequantSumArgs& a) {
  ZDP_RETURN_IF_ERROR(check_dequant_sum_args(a));
  cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) { dequant_sum_range(a, begin, end); });
  return Status::Ok();
}

Status dequantize_cpu(const DequantizeArgs& a) {
  ZDP_RETURN_IF_ERROR(check_dequantize_args(a));
  return dispatch_float(a.out_dtype, "dequantize output", [&](auto o) {
    using O = decltype(o);
    for (int c = 0; c < a.chunks; ++c) {
      const void* chunk = static_cast<const char*>(a.in) + c * a.chunk_stride;
      const float* scales = scales_of(chunk);
      const uint8_t* codes = codes_of(chunk, a.count);
      O* out = static_cast<O*>(a.out) + c * a.count;
      cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          out[k] = from_f32<O>(quant_value(code_at(codes, k, a.bits), scales[k / kQuantBlock]));
        }
      });
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
