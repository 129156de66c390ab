// Element-wise pieces of the reference models: the residual add, GELU (tanh form, the
// one GPT-2 and cuBLASLt's epilogues use: gelu_tanh in kernels/gemm.h) with its
// derivative, and the squared-error loss of the regression MLP. fp32 math on fp32/bf16/fp16 storage.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/gemm.h"  // gelu_tanh, tanh_branchless

namespace zdp::kernels {

// out = a + b (out may be a or b).
struct AddArgs {
  int64_t count = 0;
  DType dtype = DType::kF32;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

// Forward: y = gelu(x). Backward: dx = dy * gelu'(x) (x: the forward's input).
struct GeluArgs {
  int64_t count = 0;
  DType dtype = DType::kF32;
  const void* x = nullptr;
  const void* dy = nullptr;  // backward only
  void* out = nullptr;       // y (forward) or dx (backward); may alias x or dy
};

// Squared error per row: loss[r] = 0.5 * sum_c (pred - target)^2, and
// dpred = grad_scale * (pred - target) when dpred is not null (it may alias pred).
struct SquaredErrorArgs {
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kF32;      // of pred and dpred
  const void* pred = nullptr;
  const float* target = nullptr;  // rows x cols, fp32
  float* losses = nullptr;        // rows
  void* dpred = nullptr;
  float grad_scale = 1.0f;
};

// d/dx of gelu_tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),
// t = tanh(sqrt(2/pi) (x + 0.044715 x^3)).
ZDP_HD float gelu_tanh_grad(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float t = tanh_branchless(kSqrt2OverPi * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 0.134145f * x * x);
}

// Row r of the squared error, with pred and dpred stored as T: the math the CPU loop and
// the CUDA kernel (one thread per row) both run.
template <typename T>
ZDP_HD void squared_error_row(const SquaredErrorArgs& a, int64_t r) {
  const T* pred = static_cast<const T*>(a.pred);
  T* dpred = static_cast<T*>(a.dpred);
  float sum = 0.0f;
  for (int64_t c = 0; c < a.cols; ++c) {
    const int64_t i = r * a.cols + c;
    const float e = to_f32(pred[i]) - a.target[i];
    sum += e * e;
    if (dpred != nullptr) dpred[i] = from_f32<T>(a.grad_scale * e);
  }
  a.losses[r] = 0.5f * sum;
}

Status check_add(const AddArgs& a);
Status check_gelu(const GeluArgs& a, bool backward);
Status check_squared_error(const SquaredErrorArgs& a);

Status add_cpu(const AddArgs& a);
Status gelu_forward_cpu(const GeluArgs& a);
Status gelu_backward_cpu(const GeluArgs& a);
Status squared_error_cpu(const SquaredErrorArgs& a);
// Enqueued on `stream`; kUnavailable in builds without CUDA.
Status add_cuda(const AddArgs& a, cudaStream_t stream);
Status gelu_forward_cuda(const GeluArgs& a, cudaStream_t stream);
Status gelu_backward_cuda(const GeluArgs& a, cudaStream_t stream);
Status squared_error_cuda(const SquaredErrorArgs& a, cudaStream_t stream);

}  // namespace zdp::kernels
