// Matrix multiply for the trainer behind one interface: cuBLASLt on the GPU (bf16/fp16/fp32
// in, fp32 accumulate, bias and GELU fused as epilogues, heuristics cached per shape) and
// OpenBLAS on the CPU (cblas_sgemm, then bias and GELU in one pass over C).
//
// Layout: column-major, as BLAS and cuBLASLt. Element (i, j) of an r x c matrix X with
// leading dimension ldx >= r is X[i + j * ldx].
//   C (m x n) = epilogue(alpha * op(A) * op(B) + beta * C)     (C read from c_in when set)
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
#include "zdp/device_kind.h"

namespace zdp::kernels {

enum class Transpose : uint8_t { kNo = 0, kYes };
// The fused epilogues (cuBLASLt's; the CPU backend computes the same after its sgemm):
//  kBias, kGelu, kBiasGelu: C = [gelu](AB + bias);
//  kBiasGeluAux: aux = AB + bias (the pre-activation backward needs), C = gelu(aux);
//  kDGeluBgrad: C = AB * gelu'(aux) (aux: the forward's pre-activation) and dbias (m
//    elements) = the row sums of that C (over the n columns): the gradient of the layer
//    whose output went through the GELU, and of its bias, in one GEMM;
//  kBgradB: C = AB and dbias (n elements) = the column sums of op(B) (over k): a linear
//    layer's bias gradient next to its weight gradient;
//  kDGelu: C = AB * gelu'(aux), kDGeluBgrad without the bias gradient.
enum class Epilogue : uint8_t { kNone = 0, kBias, kGelu, kBiasGelu, kBiasGeluAux, kDGeluBgrad, kBgradB, kDGelu };
// How fp32 inputs are multiplied on the GPU (the CPU is always IEEE fp32).
enum class Fp32Math : uint8_t { kIeee = 0, kTf32 };

const char* to_string(Transpose t);
const char* to_string(Epilogue e);

// An input matrix: column-major, `ld` elements between columns, used as stored or transposed.
struct GemmInput {
  const void* data = nullptr;
  int64_t ld = 0;
  Transpose trans = Transpose::kNo;
};
// The output matrix C (m x n, column-major).
struct GemmOutput {
  void* data = nullptr;
  int64_t ld = 0;
};

// C = alpha * op(A) * op(B) + beta * C, then the epilogue; op(A) is m x k, op(B) k x n.
struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  GemmInput a;
  GemmInput b;
  GemmOutput c;
  DType ab_dtype = DType::kF32;  // A and B: fp32, bf16 or fp16 (the CPU takes fp32 only)
  DType c_dtype = DType::kF32;   // fp32, or ab_dtype
  Epilogue epilogue = Epilogue::kNone;
  const void* bias = nullptr;  // m elements of c_dtype, for kBias, kBiasGelu, kBiasGeluAux
  // kBiasGeluAux (written), kDGeluBgrad and kDGelu (read): m x n of c_dtype, leading dimension
  // aux_ld (cuBLASLt: a multiple of 8, >= m).
  void* aux = nullptr;
  int64_t aux_ld = 0;
  void* dbias = nullptr;  // kDGeluBgrad (m elements), kBgradB (n elements): c_dtype, written
  float alpha = 1.0f;
  float beta = 0.0f;  // C is read only when beta != 0
  // With beta != 0: beta * C reads this matrix (m x n, c_dtype, leading dimension c.ld) in
  // place of C's own contents, so that C = AB + beta * c_in (+ bias) without first copying
  // c_in into C: a residual added in the GEMM's epilogue. nullptr: C itself. It may be C.
  // Batch 1 only.
  const void* c_in = nullptr;
  Fp32Math fp32_math = Fp32Math::kIeee;
  // A strided batch of `batch` independent multiplies of the same shape: the i-th reads A,
  // B and writes C at data + i * stride_{a,b,c} elements (strides may be any value >= 0,
  // the matrices of one batch may interleave, as attention's heads do). One cuBLASLt call
  // on the GPU, a loop of identical calls on the CPU. No epilogue with batch > 1.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// "gemm N,T m=4096 n=8192 k=1024 bf16->fp32 bias+gelu": names a call in errors and benches.
std::string describe(const GemmArgs& args);

// Shape, pointer and dtype checks shared by the backends.
Status check_gemm_args(const GemmArgs& args);

// exp(x) without branches or libm calls, so that loops over it vectorise: Cody-Waite
// reduction x = n ln2 + r, Cephes' degree-6 polynomial for e^r, 2^n through the exponent
// bits. Within 2 ulp of exp for x in [-87, 88] (clamped outside).
ZDP_HD float exp_branchless(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return p * bits_float(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

// tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)), branch-free. Its absolute error stays below
// 2 u (u = 2^-24; measured over a dense sweep), which is what GELU needs: the relative
// error near 0 is larger than libm's, but GELU multiplies tanh by x there. libm's tanhf
// does not vectorise and cost more than the GEMM it followed (~20 ns per element).
ZDP_HD float tanh_branchless(float x) {
  const float a = x < 0.0f ? -x : x;
  const float e = exp_branchless(2.0f * (a < 10.0f ? a : 10.0f));  // tanh(10) rounds to 1
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return x < 0.0f ? -t : t;
}

// GELU, tanh form (the one cuBLASLt's GELU epilogues and GPT-2 use):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
ZDP_HD float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float inner = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanh_branchless(inner));
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
// Pins the CPU GEMM's thread count (the environment gives a rank its own): for a program
// that times one rank's GEMM without being one (dp-launch plan --calibrate), and 1 in
// deterministic mode (trainer::Ops::create: the results depend on the count). Only the
// GEMM calls run at that count; the calling thread's OpenMP count, which every other CPU
// kernel uses, stays as it was. 0 unpins it.
void set_cpu_gemm_threads(int threads);

// What decides the CPU GEMM's bits besides the thread count: OpenBLAS's build and the
// core it chose for this CPU ("OpenBLAS 0.3.21 DYNAMIC_ARCH ... , core Cooperlake"): a
// DYNAMIC_ARCH build picks its kernels from cpuid (or OPENBLAS_CORETYPE) when it loads,
// and kernels for different cores round differently.
std::string cpu_gemm_library();
// "cuBLASLt 130100" (cublasLtGetVersion); empty in builds without CUDA.
std::string gpu_gemm_library();

// Sets the calling thread's OpenMP count (every CPU kernel's loops and OpenBLAS's OpenMP
// build) and, for OpenBLAS's pthreads build, its pool: what OMP_NUM_THREADS would have
// said, for a rank whose launcher did not (zdp::init).
void set_cpu_threads(int threads);

// cuBLASLt on the current CUDA device. `workspace` is device memory the caller owns and
// keeps alive (a Device allocation under MemCategory::kWorkspace, so it is accounted);
// 32 MiB lets Hopper use its best algorithms, null/0 works but limits them.
// kUnavailable in builds without CUDA. `pinned` (deterministic mode): the algorithm depends
// on the shape, types and epilogue alone, never on the pointers' alignment, and never
// splits the inner dimension, so a micro-batch's GEMMs compute the same bits wherever the
// layout puts the parameters (on one GPU kind and library version).
inline constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;
StatusOr<std::unique_ptr<Gemm>> make_cublaslt_gemm(void* workspace, int64_t workspace_bytes, bool pinned = false);

}  // namespace zdp::kernels
