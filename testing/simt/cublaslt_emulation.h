// cuBLASLt's matmul API on the host, for the SIMT emulation's model tests: zdp's own
// cuBLASLt wrapper (kernels/cuda/gemm_cublaslt.cc) compiled unchanged against these
// functions (force-included: the macros below rename its calls), so that the GPU path of
// trainer/models (linear layers through cuBLASLt, the residual as beta * C from a matrix
// of its own, the GELU epilogues, the attention's strided batches) runs here, against the
// CPU model, before a GPU is lent.
//
// What it computes is cublasLt.h's documented contract, on the host: D = epilogue(alpha
// op(A) op(B) + beta C) per matrix of a strided batch, accumulated in double and rounded
// once to D's type; the epilogues' GELU is zdp's gelu_tanh (the tanh form, which the
// header names), its derivative gelu_tanh_grad; the bias gradients (DGELU_BGRAD,
// BGRADA/B) sum the values they are documented to sum. Not its numerics (cuBLASLt's
// summation order and its GELU's last bits are its own) nor its speed.
//
// What it checks, each a documented condition or one a GPU would turn into a wrong
// result or a fault rather than an error (the first failure of a call is also printed):
// layouts that agree with the transposes and with each other (A: m x k or k x m, B, C
// and D: m x n), ld >= rows, the same batch count everywhere and D's matrices not
// overlapping; A and B of one type, fp32 C when they are fp32, TF32 only for fp32;
// a bias (or bias-gradient) pointer where the epilogue reads or writes one, of D's type;
// the GELU epilogues' aux pointer and its leading dimension (a multiple of 8, >= m);
// D sharing no element with A, B or (unless it is C, with C's layout) C; and, at each
// matmul, every pointer at least as aligned as the heuristic was told it would be (the
// preference's minimum alignments for A, B, C and D, 256 bytes where unset; for the bias
// and aux vectors, the alignment of the pointers set when the heuristic ran); C apart from
// D only on an algorithm that supports it (set_out_of_place_support).
#pragma once

#include <cublasLt.h>

#include <string>

namespace zdp_emu::lt {

cublasStatus_t create(cublasLtHandle_t* handle);
cublasStatus_t destroy(cublasLtHandle_t handle);
const char* status_name(cublasStatus_t status);
const char* status_string(cublasStatus_t status);
cublasStatus_t matmul_desc_create(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t matmul_desc_destroy(cublasLtMatmulDesc_t desc);
cublasStatus_t matmul_desc_set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                         const void* buf, size_t bytes);
cublasStatus_t matrix_layout_create(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                    int64_t ld);
cublasStatus_t matrix_layout_destroy(cublasLtMatrixLayout_t layout);
cublasStatus_t matrix_layout_set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute,
                                           const void* buf, size_t bytes);
cublasStatus_t preference_create(cublasLtMatmulPreference_t* pref);
cublasStatus_t preference_destroy(cublasLtMatmulPreference_t pref);
cublasStatus_t preference_set_attribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
                                        const void* buf, size_t bytes);
cublasStatus_t algo_get_heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                  cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                  cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                                  int* returned);
cublasStatus_t matmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a_ptr,
                      cublasLtMatrixLayout_t a, const void* b_ptr, cublasLtMatrixLayout_t b, const void* beta,
                      const void* c_ptr, cublasLtMatrixLayout_t c, void* d_ptr, cublasLtMatrixLayout_t d,
                      const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT (int32_t) is the only capability answered.
cublasStatus_t algo_cap_get_attribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attribute,
                                      void* buf, size_t bytes, size_t* written);
// Test knob: whether the heuristic's algorithms support a result D apart from C (true by
// default). cuBLASLt's heuristic sees layouts, not pointers, and a real card's algorithms
// each say whether they do; a matmul with C != D on one that does not is
// CUBLAS_STATUS_NOT_SUPPORTED here.
void set_out_of_place_support(bool supported);

// The emulation's version for cublasLtGetVersion: the toolkit's, as its headers say (the
// deterministic mode names it among the libraries every rank must share).
size_t get_version();

// Why the last call of this thread failed ("" after a success): what a test asserts on.
std::string last_error();

}  // namespace zdp_emu::lt

#define cublasLtCreate ::zdp_emu::lt::create
#define cublasLtDestroy ::zdp_emu::lt::destroy
#define cublasLtGetStatusName ::zdp_emu::lt::status_name
#define cublasLtGetStatusString ::zdp_emu::lt::status_string
#define cublasLtMatmulDescCreate ::zdp_emu::lt::matmul_desc_create
#define cublasLtMatmulDescDestroy ::zdp_emu::lt::matmul_desc_destroy
#define cublasLtMatmulDescSetAttribute ::zdp_emu::lt::matmul_desc_set_attribute
#define cublasLtMatrixLayoutCreate ::zdp_emu::lt::matrix_layout_create
#define cublasLtMatrixLayoutDestroy ::zdp_emu::lt::matrix_layout_destroy
#define cublasLtMatrixLayoutSetAttribute ::zdp_emu::lt::matrix_layout_set_attribute
#define cublasLtMatmulPreferenceCreate ::zdp_emu::lt::preference_create
#define cublasLtMatmulPreferenceDestroy ::zdp_emu::lt::preference_destroy
#define cublasLtMatmulPreferenceSetAttribute ::zdp_emu::lt::preference_set_attribute
#define cublasLtMatmulAlgoGetHeuristic ::zdp_emu::lt::algo_get_heuristic
#define cublasLtMatmulAlgoCapGetAttribute ::zdp_emu::lt::algo_cap_get_attribute
#define cublasLtMatmul ::zdp_emu::lt::matmul
#define cublasLtGetVersion ::zdp_emu::lt::get_version
