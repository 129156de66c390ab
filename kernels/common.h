// Types shared by every fused kernel: element storage types with their fp32 conversions,
// rounding modes, the weight-decay segment table, and the stream type of the launchers.
// Host code that includes this needs no CUDA header.
#pragma once

#include <cstdint>

#include "kernels/convert.h"
#include "zdp/dtype.h"
#include "zdp/status.h"

// The CUDA runtime's stream type, declared here exactly as cuda_runtime.h declares it, so
// that the launchers' declarations compile in CPU-only translation units too.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace zdp::kernels {

// Storage types: distinct C++ types for the two 16-bit formats, which share uint16_t bits.
struct Bf16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};
// Marks "no output tensor" in kernels whose compute-dtype output is optional.
struct NoOutput {};

// fp16 <-> fp32 without branches, so that CPU loops over fp16 vectorise (the versions in
// kernels/convert.h return early and do not). Same bits as those for every input,
// NaNs included (tests/unit/rounding_test.cc); after F. Giesen's "half_to_float_fast5"
// and "float_to_half_fast3_rtne". Subnormals go through one exact fp32 add/subtract,
// which needs no flush-to-zero (neither the CPU build nor nvcc -ftz=false flushes).
ZDP_HD float f16_to_f32_branchless(uint16_t h) {
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = shifted & 0x0f800000u;
  const uint32_t normal = shifted + 0x38000000u;                       // rebias 15 -> 127
  const uint32_t inf_nan = normal + 0x38000000u;                       // exponent 31 -> 255
  const float sub = bits_float(normal + 0x00800000u) - 6.103515625e-05f;  // exact: (man * 2^-24)
  const uint32_t magnitude = exp == 0x0f800000u ? inf_nan : (exp == 0 ? float_bits(sub) : normal);
  return bits_float(magnitude | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

ZDP_HD uint16_t f32_to_f16_branchless(float x) {
  const uint32_t u = float_bits(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t f = u & 0x7fffffffu;
  const uint32_t inf_nan = f > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Below 2^-14: adding 0.5 rounds |x| to a multiple of 2^-24 (ties to even) in the low bits.
  const uint32_t sub = float_bits(bits_float(f) + 0.5f) - 0x3f000000u;
  // Normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even (a carry may
  // reach the exponent, up to infinity, as it should).
  const uint32_t normal = (f + 0xc8000fffu + ((f >> 13) & 1u)) >> 13;
  const uint32_t magnitude = f >= 0x47800000u ? inf_nan : (f < 0x38800000u ? sub : normal);
  return static_cast<uint16_t>(magnitude | sign);
}

ZDP_HD float to_f32(float x) { return x; }
ZDP_HD float to_f32(Bf16 x) { return bf16_to_f32(x.bits); }
ZDP_HD float to_f32(Half x) { return f16_to_f32_branchless(x.bits); }

// Round-to-nearest-even conversion from fp32 into storage type T.
template <typename T>
ZDP_HD T from_f32(float x);
template <>
ZDP_HD float from_f32<float>(float x) { return x; }
template <>
ZDP_HD Bf16 from_f32<Bf16>(float x) { return Bf16{f32_to_bf16(x)}; }
template <>
ZDP_HD Half from_f32<Half>(float x) { return Half{f32_to_f16_branchless(x)}; }

// How fp32 results are rounded into a 16-bit output.
enum class Rounding : uint8_t {
  kNearest = 0,  // round to nearest, ties to even
  kStochastic,   // bf16 and fp16: round up with probability equal to the dropped fraction
};
const char* to_string(Rounding rounding);

// A run [begin, end) of GLOBAL element indices (positions in the flat parameter buffer,
// not in one rank's slice) whose weight decay differs from the default, e.g. 0 for biases
// and norms. Tables are sorted by begin and disjoint; a kernel applied to a slice looks
// its elements up by global index, so every rank can pass the same whole-model table
// however the buffer was cut.
struct DecaySegment {
  int64_t begin = 0;
  int64_t end = 0;
  float weight_decay = 0.0f;
};

// Index of the first segment whose end is past `index` (num when none): where a kernel
// starts walking the table for an element. Binary search, O(log num).
ZDP_HD int64_t first_segment_ending_after(const DecaySegment* segments, int64_t num, int64_t index) {
  int64_t lo = 0, hi = num;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (segments[mid].end <= index) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The weight decay of global element `index`, given `cursor` from a previous lookup at an
// index <= this one (moved forward as needed, so walking consecutive elements is O(1)).
ZDP_HD float weight_decay_at(const DecaySegment* segments, int64_t num, int64_t index, float default_decay,
                             int64_t& cursor) {
  while (cursor < num && segments[cursor].end <= index) ++cursor;
  return (cursor < num && segments[cursor].begin <= index) ? segments[cursor].weight_decay : default_decay;
}

// kInvalidArgument unless `segments` (host memory) is sorted, disjoint and non-empty-ranged.
Status validate_segments(const DecaySegment* segments, int64_t num);

// Calls fn(T{}) with the storage type of a floating-point dtype (float, Bf16, Half);
// kInvalidArgument naming `what` for any other dtype.
template <typename Fn>
Status dispatch_float(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(float{});
    case DType::kBF16: return fn(Bf16{});
    case DType::kF16: return fn(Half{});
    default: break;
  }
  return Status(StatusCode::kInvalidArgument,
                std::string(what) + ": dtype " + to_string(dtype) + " is not a floating-point type");
}

// Fixed-order column sums over tall inputs (LayerNorm's dweight/dbias, bias gradients)
// cut the rows into chunks: 128 rows, or more where 128 would need more than 65535 chunks
// (the GPU grid's y limit). A function of rows alone, so that both devices cut the same
// chunks and sum in the same order.
// In a chunk, kColumnSumLanes lane sums, lane l taking rows l, l + lanes, ... of the chunk
// in row order; the chunk's sum ((lane 0 + lane 1) + lane 2) + ...; then the chunks' sums
// in chunk order (kernels/bias_grad.h, kernels/layernorm.h).
inline constexpr int64_t kColumnSumRowChunk = 128;
inline constexpr int kColumnSumLanes = 8;
inline constexpr int64_t kColumnSumMaxChunks = 65535;
ZDP_HD int64_t column_sum_row_chunk(int64_t rows) {
  const int64_t least = (rows + kColumnSumMaxChunks - 1) / kColumnSumMaxChunks;
  return least > kColumnSumRowChunk ? least : kColumnSumRowChunk;
}
ZDP_HD int64_t column_sum_chunks(int64_t rows) {
  const int64_t chunk = column_sum_row_chunk(rows);
  return rows <= chunk ? 1 : (rows + chunk - 1) / chunk;
}

}  // namespace zdp::kernels
