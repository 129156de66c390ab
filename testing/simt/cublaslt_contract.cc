// What cublasLt.h documents about a matmul, checked (cublaslt_contract.h).
#include "testing/simt/cublaslt_contract.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>
#include <utility>

#include "kernels/convert.h"
#include "testing/simt/cublaslt_emulation.h"  // status_name, last_error

namespace zdp_emu::lt {

thread_local std::string g_last_error;

cublasStatus_t fail(cublasStatus_t status, const std::string& why) {
  g_last_error = why;
  std::fprintf(stderr, "[cuBLASLt emulation] %s: %s\n", status_name(status), why.c_str());
  return status;
}
cublasStatus_t ok() {
  g_last_error.clear();
  return CUBLAS_STATUS_SUCCESS;
}

std::string last_error() { return g_last_error; }

namespace {

bool emulated_epilogue(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    default: return false;
  }
}

std::string dims(const Layout& l) {
  return std::to_string(l.rows) + " x " + std::to_string(l.cols) + " (ld " + std::to_string(l.ld) + ", " +
         type_name(l.type) + (l.batch > 1 ? ", batch " + std::to_string(l.batch) : std::string()) + ")";
}

// The element offsets (from the base, in elements) a layout covers, batch by batch.
template <typename F>
void for_each_element(const Layout& l, F f) {
  for (int32_t bt = 0; bt < l.batch; ++bt) {
    for (int64_t j = 0; j < l.cols; ++j) {
      for (int64_t i = 0; i < l.rows; ++i) f(bt * l.stride + i + j * l.ld);
    }
  }
}

// Whether two matrices of a strided batch share an element (heads interleaved in one
// buffer, a stride below a matrix's extent, do not: their columns alternate).
bool batch_overlaps(const Layout& l) {
  std::unordered_set<int64_t> seen;
  bool overlap = false;
  for_each_element(l, [&](int64_t off) { overlap = !seen.insert(off).second || overlap; });
  return overlap;
}

// The bytes from a layout's first element to past its last, [first, last).
std::pair<uintptr_t, uintptr_t> extent(const void* p, const Layout& l) {
  const auto base = reinterpret_cast<uintptr_t>(p);
  const int64_t last = (l.batch - 1) * l.stride + (l.cols - 1) * l.ld + l.rows;  // elements past the end
  const int64_t first = std::min<int64_t>(0, (l.batch - 1) * l.stride);         // a negative stride
  return {base + first * type_bytes(l.type), base + last * type_bytes(l.type)};
}

}  // namespace

size_t type_bytes(int32_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 0;
  }
}
const char* type_name(int32_t t) {
  switch (t) {
    case CUDA_R_32F: return "fp32";
    case CUDA_R_16BF: return "bf16";
    case CUDA_R_16F: return "fp16";
    default: return "an unemulated type";
  }
}

float load(int32_t type, const void* base, int64_t index) {
  switch (type) {
    case CUDA_R_16BF: return zdp::kernels::bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_16F: return zdp::kernels::f16_to_f32(static_cast<const uint16_t*>(base)[index]);
    default: return static_cast<const float*>(base)[index];
  }
}
void store(int32_t type, void* base, int64_t index, float v) {
  switch (type) {
    case CUDA_R_16BF: static_cast<uint16_t*>(base)[index] = zdp::kernels::f32_to_bf16(v); break;
    case CUDA_R_16F: static_cast<uint16_t*>(base)[index] = zdp::kernels::f32_to_f16(v); break;
    default: static_cast<float*>(base)[index] = v;
  }
}

uint64_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return kMaxAlignment;  // unset: no constraint seen
  return std::min<uint64_t>(a & (~a + 1), kMaxAlignment);
}
uint64_t batch_alignment(const void* p, const Layout& l) {
  uint64_t a = alignment_of(p);
  if (l.batch > 1 && l.stride != 0) a = std::min(a, alignment_of(reinterpret_cast<const void*>(
                                                        static_cast<uintptr_t>(l.stride) * type_bytes(l.type))));
  return a;
}

cublasStatus_t check_shapes(const Desc& desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d) {
  const Layout* all[] = {&a, &b, &c, &d};
  const char* names = "ABCD";
  for (int i = 0; i < 4; ++i) {
    const Layout& l = *all[i];
    if (type_bytes(l.type) == 0) return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(1, names[i]) + ": " + type_name(l.type));
    if (l.order != CUBLASLT_ORDER_COL) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "only column-major layouts are emulated");
    if (l.ld < std::max<int64_t>(1, l.rows)) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(1, names[i]) + " " + dims(l) + ": ld < rows");
    }
    if (l.batch != d.batch) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(1, names[i]) + " " + dims(l) + ": batch count differs from D's");
    }
  }
  const int64_t m = d.rows, n = d.cols;
  const bool ta = desc.trans_a == CUBLAS_OP_T, tb = desc.trans_b == CUBLAS_OP_T;
  const int64_t k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.rows : b.cols) != n || (tb ? b.cols : b.rows) != k || c.rows != m ||
      c.cols != n) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string("layouts disagree with op(A) m x k, op(B) k x n, C = D m x n: A ") +
                                                 dims(a) + (ta ? " transposed" : "") + ", B " + dims(b) +
                                                 (tb ? " transposed" : "") + ", C " + dims(c) + ", D " + dims(d));
  }
  if (d.batch > 1 && batch_overlaps(d)) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "D " + dims(d) + ": its batch stride " + std::to_string(d.stride) +
                                                 " makes two of the batch's matrices share an element");
  }
  if (a.type != b.type) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "A and B of different types");
  if (c.type != d.type) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "C and D of different types");
  if (a.type == CUDA_R_32F && d.type != CUDA_R_32F) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "fp32 A and B need fp32 C and D");
  if (desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a.type != CUDA_R_32F) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "TF32 compute with non-fp32 inputs");
  }
  if (desc.compute != CUBLAS_COMPUTE_32F && desc.compute != CUBLAS_COMPUTE_32F_FAST_TF32) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "only fp32 accumulation is emulated");
  }
  if (desc.scale != CUDA_R_32F) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "only fp32 alpha and beta are emulated");
  if (desc.trans_c != CUBLAS_OP_N) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC must be CUBLAS_OP_N");
  const uint32_t e = desc.epilogue;
  if (!emulated_epilogue(e)) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue " + std::to_string(e) + " is not emulated");
  if ((reads_bias(e) || writes_bgrad(e)) && desc.bias_type != -1 && desc.bias_type != d.type) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string("bias of type ") + type_name(desc.bias_type) + " with D of " +
                                                 type_name(d.type) + " (cublasLt.h: the bias is D's type)");
  }
  if (gelu_aux(e) || dgelu(e)) {
    if (desc.aux_ld % 8 != 0 || desc.aux_ld < m) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD " + std::to_string(desc.aux_ld) +
                                                   ": must be a multiple of 8 and >= m = " + std::to_string(m));
    }
  }
  if (e != CUBLASLT_EPILOGUE_DEFAULT && d.batch > 1 && (desc.bias_batch_stride != 0 || desc.aux_batch_stride != 0)) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "batched epilogue vectors are not emulated");
  }
  return ok();
}

// Whether any byte of `x`'s elements is a byte of `y`'s: exact, element by element, where
// their extents overlap (two heads of one buffer interleave without sharing an element).
bool share_memory(const void* x, const Layout& lx, const void* y, const Layout& ly) {
  const auto ex = extent(x, lx), ey = extent(y, ly);
  if (ex.second <= ey.first || ey.second <= ex.first) return false;
  std::unordered_set<uintptr_t> bytes;
  const size_t xb = type_bytes(lx.type), yb = type_bytes(ly.type);
  for_each_element(lx, [&](int64_t off) {
    for (size_t s = 0; s < xb; ++s) bytes.insert(reinterpret_cast<uintptr_t>(x) + off * xb + s);
  });
  bool shared = false;
  for_each_element(ly, [&](int64_t off) {
    for (size_t s = 0; s < yb && !shared; ++s) shared = bytes.count(reinterpret_cast<uintptr_t>(y) + off * yb + s) > 0;
  });
  return shared;
}

}  // namespace zdp_emu::lt
