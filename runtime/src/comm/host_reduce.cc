// Host reductions: plain loops the compiler vectorises for fp32/int64; fp16/bf16 go
// through the shared conversion functions of kernels/convert.h.
#include "runtime/src/comm/host_reduce.h"

#include <algorithm>
#include <cstdint>

#include "kernels/convert.h"

namespace zdp {
namespace {

template <typename T>
void sum_native(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

template <typename T>
void max_native(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
}

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void sum_16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromF32(ToF32(x[i]) + ToF32(y[i]));
}

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void max_16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromF32(std::max(ToF32(x[i]), ToF32(y[i])));
}

template <float (*ToF32)(uint16_t), uint16_t (*FromF32)(float)>
void scale_16(void* buf, size_t n, float factor) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = FromF32(ToF32(p[i]) * factor);
}

using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

}  // namespace

HostReduceFn host_reduce_fn(DType dtype, ReduceOp op) {
  const bool is_max = op == ReduceOp::kMax;
  switch (dtype) {
    case DType::kF32: return is_max ? &max_native<float> : &sum_native<float>;
    case DType::kI64: return is_max ? &max_native<int64_t> : &sum_native<int64_t>;
    case DType::kF16: return is_max ? &max_16<f16_to_f32, f32_to_f16> : &sum_16<f16_to_f32, f32_to_f16>;
    case DType::kBF16: return is_max ? &max_16<bf16_to_f32, f32_to_bf16> : &sum_16<bf16_to_f32, f32_to_bf16>;
  }
  return nullptr;
}

void host_scale(void* buf, size_t n, DType dtype, float factor) {
  switch (dtype) {
    case DType::kF32: {
      float* p = static_cast<float*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] *= factor;
      return;
    }
    case DType::kF16: scale_16<f16_to_f32, f32_to_f16>(buf, n, factor); return;
    case DType::kBF16: scale_16<bf16_to_f32, f32_to_bf16>(buf, n, factor); return;
    case DType::kI64: return;  // rejected before launch: avg is not defined for int64
  }
}

}  // namespace zdp
