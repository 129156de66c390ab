// The emulated cuBLASLt's checks (testing/simt/cublaslt_emulation.h): each condition a GPU
// would turn into a wrong result or a fault is an error here, named. Its arithmetic is
// checked by gemm_gpu_test's cases, which run on it in this binary against OpenBLAS.
#include "testing/simt/cublaslt_emulation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// One fp32 matmul D (m x n) = op(A) op(B), planned and run through the emulated API as
// kernels/cuda/gemm_cublaslt.cc does; each knob breaks one condition.
struct Call {
  int64_t m = 8, n = 8, k = 8;
  int64_t a_ld = 8;
  int64_t b_rows = 8;  // B is k x n: anything else disagrees with A's k
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t aux_ld = 8;
  uint32_t told_alignment = 16;  // what the heuristic is told about every matrix
  int64_t a_offset = 0, d_offset = 0;  // elements into the buffers at run time
  bool d_is_a = false;

  cublasStatus_t run() {
    std::vector<float> a(256 + 8, 0.5f), b(256, 0.25f), d(256 + 8, 0.0f), aux(256, 0.1f), bias(8, 1.0f);
    float* a_ptr = aligned(a) + a_offset;
    float* d_ptr = d_is_a ? a_ptr : aligned(d) + d_offset;
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
              CUBLAS_STATUS_SUCCESS);
    const void* vec = bias.data();
    void* aux_ptr = aux.data();
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr, sizeof(aux_ptr)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, a_ld), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, b_rows, n, b_rows), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &told_alignment, sizeof(told_alignment)),
                CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &result, &found);
    const float alpha = 1, beta = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(found, 1);
      st = cublasLtMatmul(handle, desc, &alpha, a_ptr, la, aligned(b), lb, &beta, d_ptr, ld, d_ptr, ld, &result.algo,
                          nullptr, 0, nullptr);
    }
    output = std::vector<float>(d_ptr, d_ptr + m * n);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
    return st;
  }
  // The first 64-byte-aligned element of `v` (vectors leave 16 bytes' alignment to chance).
  static float* aligned(std::vector<float>& v) {
    auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - p % 64) % 64) / sizeof(float);
  }
  std::vector<float> output;
};

TEST(CublasLtEmulation, AValidCallComputesTheProductAndTheBias) {
  Call c;
  c.epilogue = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(c.run(), CUBLAS_STATUS_SUCCESS) << zdp_emu::lt::last_error();
  for (float v : c.output) EXPECT_EQ(v, 8 * 0.5f * 0.25f + 1.0f);  // exact in fp32
}

TEST(CublasLtEmulation, APointerLessAlignedThanTheHeuristicWasToldIsAnError) {
  Call c;
  c.a_offset = 1;  // 4-byte aligned, the heuristic was told 16
  EXPECT_EQ(c.run(), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(zdp_emu::lt::last_error().find("A is 4-byte aligned, the heuristic was told 16"), std::string::npos)
      << zdp_emu::lt::last_error();
  Call told_less;
  told_less.a_offset = 1;
  told_less.told_alignment = 4;
  EXPECT_EQ(told_less.run(), CUBLAS_STATUS_SUCCESS) << zdp_emu::lt::last_error();
}

TEST(CublasLtEmulation, TheGeluAuxLeadingDimensionMustBeAMultipleOf8AndAtLeastM) {
  for (int64_t aux_ld : {6, 12, 4}) {
    Call c;
    c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    c.aux_ld = aux_ld;
    EXPECT_EQ(c.run(), CUBLAS_STATUS_INVALID_VALUE) << "aux_ld " << aux_ld;
    EXPECT_NE(zdp_emu::lt::last_error().find("EPILOGUE_AUX_LD"), std::string::npos) << zdp_emu::lt::last_error();
  }
  Call fine;
  fine.epilogue = CUBLASLT_EPILOGUE_DGELU;
  fine.aux_ld = 16;
  EXPECT_EQ(fine.run(), CUBLAS_STATUS_SUCCESS) << zdp_emu::lt::last_error();
}

TEST(CublasLtEmulation, DWrittenOverAnInputIsAnError) {
  Call c;
  c.d_is_a = true;
  EXPECT_EQ(c.run(), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(zdp_emu::lt::last_error(), "D shares memory with A");
}

TEST(CublasLtEmulation, LayoutsThatDisagreeWithTheShapeOrLdBelowRowsAreErrors) {
  Call short_ld;
  short_ld.a_ld = 7;
  EXPECT_EQ(short_ld.run(), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(zdp_emu::lt::last_error().find("ld < rows"), std::string::npos) << zdp_emu::lt::last_error();
  Call other_k;
  other_k.b_rows = 9;  // op(B) 9 x 8 against op(A)'s k = 8
  EXPECT_EQ(other_k.run(), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(zdp_emu::lt::last_error().find("layouts disagree"), std::string::npos) << zdp_emu::lt::last_error();
}

}  // namespace
