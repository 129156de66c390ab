// cuBLASLt's matmul on the host: descriptors as plain structs behind cuBLASLt's opaque
// handles, the documented conditions checked (cublaslt_contract.h), the product in double
// (see the header).
#include "testing/simt/cublaslt_emulation.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/elementwise.h"  // gelu_tanh_grad
#include "kernels/gemm.h"         // gelu_tanh
#include "testing/simt/cublaslt_contract.h"

namespace zdp_emu::lt {
namespace {

struct Handle {};

// The minimum alignments the heuristic is told for A, B, C and D (cublasLt.h's default
// 256 where unset); the workspace limit and reduction schemes change nothing here.
struct Preference {
  uint32_t align[4] = {256, 256, 256, 256};
};

// What an algorithm carries from the heuristic to the matmul: a tag, the alignments it may
// assume (A, B, C, D, bias vector, aux) and the epilogue it was chosen for.
constexpr uint64_t kAlgoTag = 0x7a64702d656d75ull;  // "zdp-emu"
// cublasLtMatmulAlgo_t holds 8 words: the epilogue's slot also carries, in bit 32, whether
// the algorithm supports D apart from C.
enum AlgoSlot { kTag = 0, kAlignA, kAlignB, kAlignC, kAlignD, kAlignBias, kAlignAux, kEpilogue };
constexpr uint64_t kOutOfPlaceBit = uint64_t{1} << 32;
bool g_out_of_place_support = true;

template <typename T, typename H>
T* from(H handle) {
  return reinterpret_cast<T*>(handle);
}

template <typename T>
bool read_attribute(const void* buf, size_t bytes, T* out) {
  if (buf == nullptr || bytes != sizeof(T)) return false;
  std::memcpy(out, buf, sizeof(T));
  return true;
}

// How a set-attribute call ends: an attribute the emulation does not know, a buffer of
// another size than the attribute's, or done.
cublasStatus_t attribute_outcome(const char* kind, int attribute, bool known, bool read, size_t bytes) {
  if (!known) return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string(kind) + " " + std::to_string(attribute) + " is not emulated");
  if (!read) {
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                std::string(kind) + " " + std::to_string(attribute) + ": " + std::to_string(bytes) + " bytes is not its size");
  }
  return ok();
}

// A descriptor's or handle's creation and destruction: `object` behind cuBLASLt's opaque
// type. Destruction leaves last_error() as it is: the failure a test asks about.
template <typename H, typename T>
cublasStatus_t hand_out(H* out, T* object, const char* call) {
  if (out == nullptr) {
    delete object;
    return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(call) + ": null pointer");
  }
  *out = reinterpret_cast<H>(object);
  return ok();
}
template <typename T, typename H>
cublasStatus_t take_back(H handle) {
  delete from<T>(handle);
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

cublasStatus_t create(cublasLtHandle_t* handle) { return hand_out(handle, new Handle(), "cublasLtCreate"); }
cublasStatus_t destroy(cublasLtHandle_t handle) { return take_back<Handle>(handle); }
size_t get_version() { return CUBLAS_VERSION; }

const char* status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS (another)";
  }
}
const char* status_string(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "see the [cuBLASLt emulation] line above";
}

cublasStatus_t matmul_desc_create(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  auto* d = new Desc();
  d->compute = compute;
  d->scale = scale;
  return hand_out(desc, d, "cublasLtMatmulDescCreate");
}
cublasStatus_t matmul_desc_destroy(cublasLtMatmulDesc_t desc) { return take_back<Desc>(desc); }

cublasStatus_t matmul_desc_set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                         const void* buf, size_t bytes) {
  Desc* d = from<Desc>(desc);
  bool read = false, known = true;
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: read = read_attribute(buf, bytes, &d->trans_a); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: read = read_attribute(buf, bytes, &d->trans_b); break;
    case CUBLASLT_MATMUL_DESC_TRANSC: read = read_attribute(buf, bytes, &d->trans_c); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: read = read_attribute(buf, bytes, &d->epilogue); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: read = read_attribute(buf, bytes, &d->bias); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: read = read_attribute(buf, bytes, &d->bias_type); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: read = read_attribute(buf, bytes, &d->bias_batch_stride); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: read = read_attribute(buf, bytes, &d->aux); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: read = read_attribute(buf, bytes, &d->aux_ld); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: read = read_attribute(buf, bytes, &d->aux_batch_stride); break;
    default: known = false;
  }
  return attribute_outcome("matmul attribute", attribute, known, read, bytes);
}

cublasStatus_t matrix_layout_create(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                    int64_t ld) {
  return hand_out(layout, new Layout{type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), ld},
                  "cublasLtMatrixLayoutCreate");
}
cublasStatus_t matrix_layout_destroy(cublasLtMatrixLayout_t layout) { return take_back<Layout>(layout); }
cublasStatus_t matrix_layout_set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute,
                                           const void* buf, size_t bytes) {
  Layout* l = from<Layout>(layout);
  bool read = false, known = true;
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: read = read_attribute(buf, bytes, &l->batch); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: read = read_attribute(buf, bytes, &l->stride); break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: read = read_attribute(buf, bytes, &l->order); break;
    default: known = false;
  }
  const cublasStatus_t outcome = attribute_outcome("layout attribute", attribute, known, read, bytes);
  if (outcome != CUBLAS_STATUS_SUCCESS) return outcome;
  if (l->batch < 1) return fail(CUBLAS_STATUS_INVALID_VALUE, "batch count " + std::to_string(l->batch));
  return ok();
}

cublasStatus_t preference_create(cublasLtMatmulPreference_t* pref) {
  return hand_out(pref, new Preference(), "cublasLtMatmulPreferenceCreate");
}
cublasStatus_t preference_destroy(cublasLtMatmulPreference_t pref) { return take_back<Preference>(pref); }
cublasStatus_t preference_set_attribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
                                        const void* buf, size_t bytes) {
  Preference* p = from<Preference>(pref);
  bool read = false, known = true;
  uint64_t workspace = 0;
  uint32_t schemes = 0;
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: read = read_attribute(buf, bytes, &workspace); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: read = read_attribute(buf, bytes, &p->align[0]); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: read = read_attribute(buf, bytes, &p->align[1]); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: read = read_attribute(buf, bytes, &p->align[2]); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: read = read_attribute(buf, bytes, &p->align[3]); break;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: read = read_attribute(buf, bytes, &schemes); break;
    default: known = false;
  }
  return attribute_outcome("preference", attribute, known, read, bytes);
}

cublasStatus_t algo_get_heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                  cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                  cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                                  int* returned) {
  if (handle == nullptr || desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr ||
      pref == nullptr || results == nullptr || returned == nullptr || requested < 1) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: a null argument or no result requested");
  }
  *returned = 0;
  const Desc& ds = *from<Desc>(desc);
  const cublasStatus_t shapes = check_shapes(ds, *from<Layout>(a), *from<Layout>(b), *from<Layout>(c), *from<Layout>(d));
  if (shapes != CUBLAS_STATUS_SUCCESS) return shapes;
  const Preference& p = *from<Preference>(pref);
  results[0] = cublasLtMatmulHeuristicResult_t{};
  uint64_t* algo = results[0].algo.data;
  algo[kTag] = kAlgoTag;
  for (int i = 0; i < 4; ++i) algo[kAlignA + i] = p.align[i];
  // cublasLt.h: routines that do not dereference the bias and aux pointers (the
  // heuristic) take the alignment they may assume from the pointers' values.
  algo[kAlignBias] = alignment_of(ds.bias);
  algo[kAlignAux] = alignment_of(ds.aux);
  algo[kEpilogue] = ds.epilogue;
  if (g_out_of_place_support) algo[kEpilogue] |= kOutOfPlaceBit;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return ok();
}

void set_out_of_place_support(bool supported) { g_out_of_place_support = supported; }

cublasStatus_t algo_cap_get_attribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attribute,
                                      void* buf, size_t bytes, size_t* written) {
  if (algo == nullptr || algo->data[kTag] != kAlgoTag) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoCapGetAttribute: no algorithm from the heuristic");
  }
  if (attribute != CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoCapGetAttribute: capability " +
                                                 std::to_string(static_cast<int>(attribute)) + " is not emulated");
  }
  if (written != nullptr) *written = sizeof(int32_t);
  if (bytes != sizeof(int32_t) || buf == nullptr) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoCapGetAttribute: OUT_OF_PLACE_RESULT_SUPPORT is an int32_t");
  }
  const int32_t v = (algo->data[kEpilogue] & kOutOfPlaceBit) != 0 ? 1 : 0;
  std::memcpy(buf, &v, sizeof(v));
  return ok();
}

cublasStatus_t matmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha_ptr, const void* a_ptr,
                      cublasLtMatrixLayout_t a, const void* b_ptr, cublasLtMatrixLayout_t b, const void* beta_ptr,
                      const void* c_ptr, cublasLtMatrixLayout_t c, void* d_ptr, cublasLtMatrixLayout_t d,
                      const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (handle == nullptr || desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr ||
      alpha_ptr == nullptr || beta_ptr == nullptr) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: a null handle, descriptor, alpha or beta");
  }
  const Desc& ds = *from<Desc>(desc);
  const Layout &la = *from<Layout>(a), &lb = *from<Layout>(b), &lc = *from<Layout>(c), &ld = *from<Layout>(d);
  const cublasStatus_t shapes = check_shapes(ds, la, lb, lc, ld);
  if (shapes != CUBLAS_STATUS_SUCCESS) return shapes;
  if (algo == nullptr || algo->data[kTag] != kAlgoTag) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: no algorithm from the heuristic (the emulation picks none)");
  }
  if ((algo->data[kEpilogue] & ~kOutOfPlaceBit) != ds.epilogue) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: the algorithm was chosen for another epilogue");
  }
  if (workspace_bytes > 0 && workspace == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "workspace size without a workspace");
  if (c_ptr != d_ptr && (algo->data[kEpilogue] & kOutOfPlaceBit) == 0) {
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul: C is not D and the algorithm has no out-of-place support");
  }
  float alpha = 0, beta = 0;
  std::memcpy(&alpha, alpha_ptr, sizeof(float));
  std::memcpy(&beta, beta_ptr, sizeof(float));
  const uint32_t e = ds.epilogue;
  const int64_t m = ld.rows, n = ld.cols;
  const bool ta = ds.trans_a == CUBLAS_OP_T, tb = ds.trans_b == CUBLAS_OP_T;
  const int64_t k = ta ? la.rows : la.cols;

  // Pointers: present where needed, as aligned as the heuristic was told.
  if ((m > 0 && n > 0) && (d_ptr == nullptr || (k > 0 && (a_ptr == nullptr || b_ptr == nullptr)) ||
                           (beta != 0 && c_ptr == nullptr))) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: a null A, B, C (beta != 0) or D");
  }
  const void* ptrs[] = {a_ptr, b_ptr, c_ptr, d_ptr};
  const Layout* layouts[] = {&la, &lb, &lc, &ld};
  for (int i = 0; i < 4; ++i) {
    if (i == 2 && beta == 0) continue;  // C is not read
    const uint64_t have = batch_alignment(ptrs[i], *layouts[i]);
    if (have < algo->data[kAlignA + i]) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(1, "ABCD"[i]) + " is " + std::to_string(have) +
                                                   "-byte aligned, the heuristic was told " +
                                                   std::to_string(algo->data[kAlignA + i]));
    }
  }
  // The epilogue's vectors: set where it uses them, as aligned as when the heuristic ran.
  const struct {
    bool used;
    const void* ptr;
    AlgoSlot slot;
    const char* name;
  } vectors[] = {{reads_bias(e) || writes_bgrad(e), ds.bias, kAlignBias, "BIAS_POINTER"},
                 {gelu_aux(e) || dgelu(e), ds.aux, kAlignAux, "EPILOGUE_AUX_POINTER"}};
  for (const auto& v : vectors) {
    if (!v.used) continue;
    if (v.ptr == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, std::string("the epilogue needs ") + v.name);
    if (alignment_of(v.ptr) < algo->data[v.slot]) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(v.name) + " is " + std::to_string(alignment_of(v.ptr)) +
                                                   "-byte aligned, the heuristic saw a pointer aligned to " +
                                                   std::to_string(algo->data[v.slot]));
    }
  }
  // D written while A, B or C is read: a GPU reads what another block already wrote.
  if (m > 0 && n > 0) {
    if (k > 0 && share_memory(d_ptr, ld, a_ptr, la)) return fail(CUBLAS_STATUS_INVALID_VALUE, "D shares memory with A");
    if (k > 0 && share_memory(d_ptr, ld, b_ptr, lb)) return fail(CUBLAS_STATUS_INVALID_VALUE, "D shares memory with B");
    const bool in_place = c_ptr == d_ptr && lc.ld == ld.ld && lc.stride == ld.stride;
    if (beta != 0 && !in_place && share_memory(d_ptr, ld, c_ptr, lc)) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, "D shares memory with C but is not C (same pointer and layout)");
    }
    const Layout aux_layout{ld.type, m, n, ds.aux_ld};
    if ((gelu_aux(e) || dgelu(e)) && share_memory(d_ptr, ld, ds.aux, aux_layout)) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, "D shares memory with the epilogue's aux matrix");
    }
  }

  // The product and the epilogue, matrix by matrix of the batch, when the stream runs it:
  // the descriptors, layouts and scalars as they are now (cuBLASLt reads them at the call;
  // zdp sets a plan's bias and aux pointers before each call).
  const Desc ds_now = ds;
  const Layout la_now = la, lb_now = lb, lc_now = lc, ld_now = ld;
  ::zdp_emu::submit(stream, [=]() -> std::string {
    const Desc& ds = ds_now;
    const Layout &la = la_now, &lb = lb_now, &lc = lc_now, &ld = ld_now;
    const int32_t vt = ld.type;  // bias, aux and the bias gradient: D's type
    for (int32_t bt = 0; bt < ld.batch; ++bt) {
      const int64_t oa = bt * la.stride, ob = bt * lb.stride, oc = bt * lc.stride, od = bt * ld.stride;
      std::vector<double> bgrad(e == CUBLASLT_EPILOGUE_BGRADB ? n : m, 0.0);
      // op(A)'s rows and op(B)'s columns as contiguous floats, read once.
      std::vector<float> rows_a(static_cast<size_t>(m * k)), cols_b(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) rows_a[i * k + p] = load(la.type, a_ptr, oa + (ta ? p + i * la.ld : i + p * la.ld));
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) cols_b[j * k + p] = load(lb.type, b_ptr, ob + (tb ? j + p * lb.ld : p + j * lb.ld));
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          const float* ra = rows_a.data() + i * k;
          const float* cb = cols_b.data() + j * k;
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(ra[p]) * cb[p];
          float x = alpha * static_cast<float>(acc);
          if (beta != 0) x += beta * load(lc.type, c_ptr, oc + i + j * lc.ld);
          if (reads_bias(e)) x += load(vt, ds.bias, i);
          if (gelu_aux(e)) store(vt, ds.aux, i + j * ds.aux_ld, x);
          if (has(e, CUBLASLT_EPILOGUE_GELU) && !dgelu(e)) x = zdp::kernels::gelu_tanh(x);
          if (dgelu(e)) x *= zdp::kernels::gelu_tanh_grad(load(vt, ds.aux, i + j * ds.aux_ld));
          if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) bgrad[i] += x;
          store(ld.type, d_ptr, od + i + j * ld.ld, x);
        }
      }
      if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {  // the sums over k of op(A)'s rows, op(B)'s columns
        for (size_t v = 0; v < bgrad.size(); ++v) {
          const float* values = (e == CUBLASLT_EPILOGUE_BGRADA ? rows_a.data() : cols_b.data()) + v * k;
          for (int64_t p = 0; p < k; ++p) bgrad[v] += values[p];
        }
      }
      if (writes_bgrad(e)) {
        for (size_t v = 0; v < bgrad.size(); ++v) store(vt, const_cast<void*>(ds.bias), static_cast<int64_t>(v), static_cast<float>(bgrad[v]));
      }
    }
    return std::string();
  });
  return ok();
}

}  // namespace zdp_emu::lt
