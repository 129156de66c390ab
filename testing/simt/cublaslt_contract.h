// What cublasLt.h documents about a matmul, for the emulation (cublaslt_emulation.h): the
// descriptors' contents, the epilogues' operands, the types, and the conditions a call
// must meet, each checked with the failure named (fail(): printed, and kept for
// last_error()). Internal to testing/simt/.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace zdp_emu::lt {

struct Layout {
  cudaDataType type;
  int64_t rows, cols, ld;
  int32_t batch = 1;
  int64_t stride = 0;  // elements between a batch's matrices
  int32_t order = CUBLASLT_ORDER_COL;
};

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N, trans_c = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's
  int64_t bias_batch_stride = 0;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int64_t aux_batch_stride = 0;
};

// The failure of a call, named (printed with the status, kept for last_error()), or a success.
cublasStatus_t fail(cublasStatus_t status, const std::string& why);
cublasStatus_t ok();

size_t type_bytes(int32_t t);  // 0 for a type the emulation does not take
const char* type_name(int32_t t);
// Element `index` of a matrix of `type` at `base`, in fp32; a store rounds to nearest even.
float load(int32_t type, const void* base, int64_t index);
void store(int32_t type, void* base, int64_t index, float v);
// The largest alignment a heuristic tells apart: the preference's minimum alignments
// default to 256 bytes (cublasLt.h), the most any algorithm is promised.
inline constexpr uint64_t kMaxAlignment = 256;
// The largest power of two dividing the address, at most kMaxAlignment (a null pointer:
// no constraint seen).
uint64_t alignment_of(const void* p);
// The least alignment among a batch's matrices (the base's and the stride's).
uint64_t batch_alignment(const void* p, const Layout& l);

// The epilogues' operands.
inline bool has(uint32_t epilogue, uint32_t bits) { return (epilogue & bits) == bits; }
inline bool reads_bias(uint32_t e) { return has(e, CUBLASLT_EPILOGUE_BIAS) && !has(e, CUBLASLT_EPILOGUE_DGELU); }
inline bool writes_bgrad(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}
inline bool gelu_aux(uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
inline bool dgelu(uint32_t e) { return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }

// The conditions that hold whatever the pointers (checked by the heuristic and the matmul).
cublasStatus_t check_shapes(const Desc& desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d);
// Whether any byte of `x`'s elements is a byte of `y`'s.
bool share_memory(const void* x, const Layout& lx, const void* y, const Layout& ly);

}  // namespace zdp_emu::lt
