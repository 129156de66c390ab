// Matrix multiply for the trainer behind one interface: cuBLASLt on the GPU (bf16/fp16/fp32
// in, fp32 accumulate, bias and GELU fused as epilogues, heuristics cached per shape) and
// OpenBLAS on the CPU (cblas_sgemm, then bias and GELU in one pass over C).
//
// Layout: column-major, as BLAS and cuBLASLt. Element (i, j) of an r x c matrix X with
// leading dimension ldx >= r is X[i + j * ldx].
//   C (m x n) = epilogue(alpha * op(A) * op(B) + beta * C)
// op(A) is m x k (A stored m x k, or k x m when transa = kYes), op(B) is k x n.
// Bias has m elements (one per row of C, broadcast along the n columns).
//
// From row-major code: a row-major R x C array is a column-major C x R matrix with the
// same leading dimension. So the linear layer Y[T, out] = X[T, in] * W[out, in]^T + b (all
// row-major) is C = Y^T: m = out, n = T, k = in, A = W with transa = kYes (lda = in),
// B = X with transb = kNo (ldb = in), C = Y (ldc = out), bias = b.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/common.h"
#include "zdp/device.h"

namespace zdp::kernels {

enum class Transpose : uint8_t { kNo = 0, kYes };
enum class Epilogue : uint8_t { kNone = 0, kBias, kGelu, kBiasGelu };
// How fp32 inputs are multiplied on the GPU (the CPU is always IEEE fp32).
enum class Fp32Math : uint8_t { kIeee = 0, kTf32 };

const char* to_string(Transpose t);
const char* to_string(Epilogue e);

struct GemmArgs {
  Transpose transa = Transpose::kNo;
  Transpose transb = Transpose::kNo;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  DType ab_dtype = DType::kF32;  // A and B: fp32, bf16 or fp16 (the CPU takes fp32 only)
  DType c_dtype = DType::kF32;   // fp32, or ab_dtype
  Epilogue epilogue = Epilogue::kNone;
  const void* bias = nullptr;  // m elements of c_dtype, for kBias and kBiasGelu
  float alpha = 1.0f;
  float beta = 0.0f;  // C is read only when beta != 0
  Fp32Math fp32_math = Fp32Math::kIeee;
};

// "gemm N,T m=4096 n=8192 k=1024 bf16->fp32 bias+gelu": names a call in errors and benches.
std::string describe(const GemmArgs& args);

// Shape, pointer and dtype checks shared by the backends.
Status check_gemm_args(const GemmArgs& args);

// GELU, tanh form (the one cuBLASLt's GELU epilogues and GPT-2 use):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
ZDP_HD float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float inner = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

class Gemm {
 public:
  virtual ~Gemm() = default;
  virtual DeviceKind kind() const = 0;
  // Runs (CPU: synchronously, on OpenBLAS's threads; `stream` is ignored) or enqueues
  // (CUDA: on `stream`) one multiply. Not thread-safe: one Gemm per stream/thread.
  virtual Status run(const GemmArgs& args, cudaStream_t stream) = 0;
};

// OpenBLAS. Thread count from OPENBLAS_NUM_THREADS / OMP_NUM_THREADS (the launcher's).
std::unique_ptr<Gemm> make_cpu_gemm();

// cuBLASLt on the current CUDA device. `workspace` is device memory the caller owns and
// keeps alive (a Device allocation under MemCategory::kWorkspace, so it is accounted);
// 32 MiB lets Hopper use its best algorithms, null/0 works but limits them.
// kUnavailable in builds without CUDA.
inline constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;
StatusOr<std::unique_ptr<Gemm>> make_cublaslt_gemm(void* workspace, int64_t workspace_bytes);

}  // namespace zdp::kernels
