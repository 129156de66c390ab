// The GPU GEMM: cuBLASLt with fp32 accumulation, bias/GELU epilogues, and one cached plan
// (matmul descriptor, matrix layouts, heuristic's algorithm) per shape, so the heuristic
// query runs once per shape instead of once per call.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "core/internal/cuda_check.h"
#include "kernels/gemm.h"

namespace zdp::kernels {
namespace {

// cuBLASLt refusing what a plan asks (an epilogue, type or alignment it does not support:
// NOT_SUPPORTED, INVALID_VALUE) is "no plan", kUnavailable, which Ops answers with separate
// kernels; another failure (ALLOC_FAILED, INTERNAL_ERROR) stays kCublasError, an error.
Status plan_status(cublasStatus_t status, const char* expr, const char* file, int line) {
  const Status s = cublas_error_status(status, expr, file, line);
  const bool refused = status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE;
  return refused ? Status(StatusCode::kUnavailable, s.message()) : s;
}

#define ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(call)                                             \
  do {                                                                                    \
    const cublasStatus_t zdp_plan_status_ = (call);                                       \
    if (zdp_plan_status_ != CUBLAS_STATUS_SUCCESS) {                                      \
      return plan_status(zdp_plan_status_, #call, __FILE__, __LINE__);                    \
    }                                                                                     \
  } while (0)

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::kBiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::kBiasGeluAux: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDGeluBgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case Epilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBgradB: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::kNone: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Largest power of two <= 256 dividing the address: the heuristic must only pick
// algorithms that can work with the pointers' actual alignment.
// In a strided batch every matrix's address counts: the base's and the stride's (in bytes).
uint32_t alignment_of(const void* p, int64_t batch = 1, int64_t stride_bytes = 0) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) a |= static_cast<uintptr_t>(stride_bytes);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// Which pointers an epilogue passes: the bias (read), aux, the bias gradient (written).
bool reads_bias(Epilogue e) { return e == Epilogue::kBias || e == Epilogue::kBiasGelu || e == Epilogue::kBiasGeluAux; }
bool uses_aux(Epilogue e) { return e == Epilogue::kBiasGeluAux || e == Epilogue::kDGeluBgrad || e == Epilogue::kDGelu; }
bool writes_dbias(Epilogue e) { return e == Epilogue::kDGeluBgrad || e == Epilogue::kBgradB; }
// The epilogue's vector: the bias it reads or the gradient it writes (one descriptor slot).
const void* bias_vector(const GemmArgs& g) { return writes_dbias(g.epilogue) ? g.dbias : g.bias; }

// Everything a plan depends on: shape, strides, types, epilogue, alignments, math mode,
// batch, aux's leading dimension and alignment.
using PlanKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, uint32_t,
                           uint32_t, uint32_t, uint32_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>;

// Whether the GEMM reads C (beta != 0) from a matrix of its own (GemmArgs::c_in), D apart.
bool out_of_place(const GemmArgs& g) { return g.beta != 0.0f && g.c_in != nullptr && g.c_in != g.c.data; }

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // Out of place, but no algorithm the heuristic offered supports D apart from C: c_in is
  // copied into D first and the GEMM runs in place (D = alpha AB + beta D).
  bool copy_c_in = false;
};

class CublasLtGemm final : public Gemm {
 public:
  CublasLtGemm(cublasLtHandle_t handle, void* workspace, int64_t workspace_bytes, bool pinned)
      : handle_(handle), workspace_(workspace), workspace_bytes_(workspace_bytes), pinned_(pinned) {}

  ~CublasLtGemm() override {
    for (auto& [key, plan] : plans_) destroy(plan);
    if (handle_) ZDP_CUBLAS_CHECK_LOG(cublasLtDestroy(handle_));
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }

  Status run(const GemmArgs& g, cudaStream_t stream) override {
    ZDP_RETURN_IF_ERROR(check_gemm_args(g));
    if (g.m == 0 || g.n == 0) return Status::Ok();
    if (g.k == 0) {
      return Status(StatusCode::kInvalidArgument, describe(g) + ": k = 0 is not supported by the cuBLASLt path");
    }
    if (g.batch > INT32_MAX) return Status(StatusCode::kInvalidArgument, describe(g) + ": batch exceeds INT32_MAX");
    const PlanKey key{static_cast<int>(g.a.trans),
                      static_cast<int>(g.b.trans),
                      g.m,
                      g.n,
                      g.k,
                      g.a.ld,
                      g.b.ld,
                      g.c.ld,
                      static_cast<int>(g.ab_dtype),
                      static_cast<int>(g.c_dtype),
                      static_cast<int>(g.epilogue),
                      static_cast<int>(g.fp32_math) * 4 + (g.beta != 0.0f) * 2 + out_of_place(g),
                      align_a(g),
                      align_b(g),
                      align_c(g),
                      align(bias_vector(g)),
                      g.batch,
                      g.stride_a,
                      g.stride_b,
                      g.stride_c,
                      uses_aux(g.epilogue) ? g.aux_ld : 0,
                      uses_aux(g.epilogue) ? align(g.aux) : 0};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan plan;
      const Status st = make_plan(g, &plan);
      if (!st.ok()) {
        destroy(plan);
        return st.with_context(describe(g));
      }
      it = plans_.emplace(key, plan).first;
    }
    Plan& plan = it->second;
    if (reads_bias(g.epilogue) || writes_dbias(g.epilogue)) {  // the pointers change from call to call
      const void* vec = bias_vector(g);
      ZDP_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)));
    }
    if (uses_aux(g.epilogue)) {
      ZDP_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)));
    }
    const void* c_in = out_of_place(g) ? g.c_in : g.c.data;  // C and D share a layout (c.ld)
    if (plan.copy_c_in) {
      ZDP_RETURN_IF_ERROR(copy_c_into_d(g, stream));
      c_in = g.c.data;
    }
    ZDP_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan.desc, &g.alpha, g.a.data, plan.a, g.b.data, plan.b, &g.beta,
                                              c_in, plan.c, g.c.data, plan.c, &plan.algo, workspace_,
                                              static_cast<size_t>(workspace_bytes_), stream));
    return Status::Ok();
  }

 private:
  // The alignment of every matrix of a batch (pinned: the element's size, as align()).
  uint32_t align_a(const GemmArgs& g) const {
    const int64_t elem = static_cast<int64_t>(dtype_size(g.ab_dtype));
    return pinned_ ? static_cast<uint32_t>(elem) : alignment_of(g.a.data, g.batch, g.stride_a * elem);
  }
  uint32_t align_b(const GemmArgs& g) const {
    const int64_t elem = static_cast<int64_t>(dtype_size(g.ab_dtype));
    return pinned_ ? static_cast<uint32_t>(elem) : alignment_of(g.b.data, g.batch, g.stride_b * elem);
  }
  // C's and D's (the plan's one alignment serves both: the smaller when c_in is its own).
  uint32_t align_c(const GemmArgs& g) const {
    const int64_t elem = static_cast<int64_t>(dtype_size(g.c_dtype));
    if (pinned_) return static_cast<uint32_t>(elem);
    const uint32_t d = alignment_of(g.c.data, g.batch, g.stride_c * elem);
    return g.c_in != nullptr ? std::min(d, alignment_of(g.c_in, g.batch, g.stride_c * elem)) : d;
  }
  // The bias (or bias gradient) and aux pointers the heuristic sees. cuBLASLt reads their
  // alignment from the address (cublasLt.h, BIAS_POINTER / EPILOGUE_AUX_POINTER); pinned,
  // it is shown an address only as aligned as C's element, so the algorithm cannot depend
  // on where the first call's vector happened to lie. run() sets the real pointers.
  const void* heuristic_pointer(const GemmArgs& g, const void* real) const {
    if (!pinned_) return real;
    constexpr uintptr_t kProbeBase = 4096;  // never dereferenced by the heuristic query
    return reinterpret_cast<const void*>(kProbeBase + dtype_size(g.c_dtype));
  }

  // D = c_in, matrix by matrix of the batch: m elements of each of the n columns (ld
  // apart; what lies between columns stays D's own).
  static Status copy_c_into_d(const GemmArgs& g, cudaStream_t stream) {
    const size_t elem = dtype_size(g.c_dtype);
    for (int64_t b = 0; b < g.batch; ++b) {
      const size_t at = static_cast<size_t>(b * g.stride_c) * elem, pitch = static_cast<size_t>(g.c.ld) * elem;
      ZDP_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(static_cast<char*>(g.c.data) + at, pitch,
                                                 static_cast<const char*>(g.c_in) + at, pitch,
                                                 static_cast<size_t>(g.m) * elem, static_cast<size_t>(g.n),
                                                 cudaMemcpyDeviceToDevice, stream));
    }
    return Status::Ok();
  }

  static void destroy(Plan& p) {
    if (p.desc) ZDP_CUBLAS_CHECK_LOG(cublasLtMatmulDescDestroy(p.desc));
    if (p.a) ZDP_CUBLAS_CHECK_LOG(cublasLtMatrixLayoutDestroy(p.a));
    if (p.b) ZDP_CUBLAS_CHECK_LOG(cublasLtMatrixLayoutDestroy(p.b));
    if (p.c) ZDP_CUBLAS_CHECK_LOG(cublasLtMatrixLayoutDestroy(p.c));
    p = Plan{};
  }

  Status make_plan(const GemmArgs& g, Plan* plan) {
    const bool tf32 = g.ab_dtype == DType::kF32 && g.fp32_math == Fp32Math::kTf32;
    const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
    const cublasOperation_t ta = g.a.trans == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.b.trans == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    const cublasLtEpilogue_t epilogue = lt_epilogue(g.epilogue);
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (reads_bias(g.epilogue) || writes_dbias(g.epilogue)) {
      const cudaDataType_t bias_type = cuda_type(g.c_dtype);  // bias and its gradient in C's type (see gemm.h)
      const void* vec = heuristic_pointer(g, bias_vector(g));
      ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                                &bias_type, sizeof(bias_type)));
      ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)));
    }
    if (uses_aux(g.epilogue)) {  // the pre-activation: in C's type when its type is unset (cublasLt.h)
      const void* aux = heuristic_pointer(g, g.aux);
      ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                                &aux, sizeof(aux)));
      ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                                &g.aux_ld, sizeof(g.aux_ld)));
    }
    const bool ta_yes = g.a.trans == Transpose::kYes, tb_yes = g.b.trans == Transpose::kYes;
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&plan->a, cuda_type(g.ab_dtype), ta_yes ? g.k : g.m, ta_yes ? g.m : g.k, g.a.ld));
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&plan->b, cuda_type(g.ab_dtype), tb_yes ? g.n : g.k, tb_yes ? g.k : g.n, g.b.ld));
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->c, cuda_type(g.c_dtype), g.m, g.n, g.c.ld));
    if (g.batch > 1) {  // every layout carries the batch; C doubles as D
      const int32_t count = static_cast<int32_t>(g.batch);
      const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {{plan->a, g.stride_a}, {plan->b, g.stride_b},
                                                                    {plan->c, g.stride_c}};
      for (const auto& [layout, stride] : layouts) {
        ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(
            cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                    &stride, sizeof(stride)));
      }
    }

    cublasLtMatmulPreference_t pref = nullptr;
    ZDP_CUBLAS_PLAN_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = static_cast<uint64_t>(workspace_bytes_);
    const uint32_t align_a = this->align_a(g), align_b = this->align_b(g), align_c = this->align_c(g);
    // Out of place, the first of the heuristic's candidates that supports D apart from C
    // (its query sees layouts, not pointers: C's and D's are one here).
    constexpr int kCandidates = 8;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    const int wanted = out_of_place(g) ? kCandidates : 1;
    int found = 0;
    cublasStatus_t status =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                    sizeof(align_a));
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                    sizeof(align_b));
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                    sizeof(align_c));
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                    sizeof(align_c));
    }
    if (status == CUBLAS_STATUS_SUCCESS && pinned_) {
      // No split-K: its partial sums would be combined in an order of the algorithm's choosing.
      const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
                                                    sizeof(scheme));
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, wanted,
                                              results, &found);
    }
    ZDP_CUBLAS_CHECK_LOG(cublasLtMatmulPreferenceDestroy(pref));
    if (status != CUBLAS_STATUS_SUCCESS) return plan_status(status, "cuBLASLt's heuristic query", __FILE__, __LINE__);
    if (found == 0) {
      return Status(StatusCode::kUnavailable, "cuBLASLt has no algorithm for this shape, type and alignment");
    }
    plan->algo = results[0].algo;
    if (out_of_place(g)) {
      plan->copy_c_in = true;
      for (int i = 0; i < found; ++i) {
        int32_t supported = 0;
        size_t written = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&results[i].algo, CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT,
                                              &supported, sizeof(supported), &written) == CUBLAS_STATUS_SUCCESS &&
            supported != 0) {
          plan->algo = results[i].algo;
          plan->copy_c_in = false;
          break;
        }
      }
    }
    return Status::Ok();
  }

  // The alignment in the plan's key: the pointer's, or when pinned none (the heuristic is
  // shown the element's alignment, which every pointer of that type has, so every algorithm
  // it may pick works wherever the engine's layout puts a parameter, and the same one is
  // picked for a shape: a bf16 parameter at an odd element offset is only 2-byte aligned).
  uint32_t align(const void* p) const { return pinned_ ? 0u : alignment_of(p); }

  cublasLtHandle_t handle_;
  void* workspace_;  // the caller's
  int64_t workspace_bytes_;
  bool pinned_;
  std::map<PlanKey, Plan> plans_;
};

}  // namespace

std::string gpu_gemm_library() { return "cuBLASLt " + std::to_string(cublasLtGetVersion()); }

StatusOr<std::unique_ptr<Gemm>> make_cublaslt_gemm(void* workspace, int64_t workspace_bytes, bool pinned) {
  if (workspace_bytes < 0 || (workspace_bytes > 0 && !workspace)) {
    return Status(StatusCode::kInvalidArgument, "cuBLASLt workspace: null pointer or negative size");
  }
  cublasLtHandle_t handle = nullptr;
  ZDP_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  return std::unique_ptr<Gemm>(new CublasLtGemm(handle, workspace, workspace_bytes, pinned));
}

}  // namespace zdp::kernels
