// GEMM argument checks and names shared by the OpenBLAS and cuBLASLt backends.
#include <algorithm>
#include <sstream>
#include <string>

#include "kernels/gemm.h"

namespace zdp::kernels {

const char* to_string(Transpose t) { return t == Transpose::kYes ? "T" : "N"; }

const char* to_string(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return "none";
    case Epilogue::kBias: return "bias";
    case Epilogue::kGelu: return "gelu";
    case Epilogue::kBiasGelu: return "bias+gelu";
    case Epilogue::kBiasGeluAux: return "bias+gelu+aux";
    case Epilogue::kDGeluBgrad: return "dgelu+bgrad";
    case Epilogue::kBgradB: return "bgradb";
    case Epilogue::kDGelu: return "dgelu";
  }
  return "?";
}

std::string describe(const GemmArgs& g) {
  std::ostringstream os;
  os << "gemm " << to_string(g.a.trans) << "," << to_string(g.b.trans) << " m=" << g.m << " n=" << g.n
     << " k=" << g.k << " " << to_string(g.ab_dtype) << "->" << to_string(g.c_dtype) << " "
     << to_string(g.epilogue);
  if (g.c_in != nullptr) os << " +c_in";
  if (g.batch != 1) os << " batch=" << g.batch << " strides=" << g.stride_a << "," << g.stride_b << "," << g.stride_c;
  return os.str();
}

Status check_gemm_args(const GemmArgs& g) {
  auto invalid = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, describe(g) + ": " + what);
  };
  if (g.m < 0 || g.n < 0 || g.k < 0) return invalid("negative dimension");
  const bool is_float = g.ab_dtype == DType::kF32 || g.ab_dtype == DType::kBF16 || g.ab_dtype == DType::kF16;
  if (!is_float) return invalid("A/B dtype must be fp32, bf16 or fp16");
  if (g.c_dtype != DType::kF32 && g.c_dtype != g.ab_dtype) return invalid("C dtype must be fp32 or the A/B dtype");
  const int64_t a_rows = g.a.trans == Transpose::kNo ? g.m : g.k;
  const int64_t b_rows = g.b.trans == Transpose::kNo ? g.k : g.n;
  if (g.a.ld < std::max<int64_t>(1, a_rows)) return invalid("lda " + std::to_string(g.a.ld) + " < rows of A");
  if (g.b.ld < std::max<int64_t>(1, b_rows)) return invalid("ldb " + std::to_string(g.b.ld) + " < rows of B");
  if (g.c.ld < std::max<int64_t>(1, g.m)) return invalid("ldc " + std::to_string(g.c.ld) + " < m");
  if (g.m > 0 && g.n > 0) {
    if (!g.c.data) return invalid("null C");
    if (g.k > 0 && (!g.a.data || !g.b.data)) return invalid("null A or B");
  }
  if (g.batch < 1) return invalid("batch must be >= 1");
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0) return invalid("negative batch stride");
  if (g.batch > 1 && g.epilogue != Epilogue::kNone) return invalid("no epilogue on a batched GEMM");
  // Outputs that overlap would race on the GPU, where the batch runs concurrently. Two
  // layouts are disjoint: whole blocks one after another (stride >= ld (n - 1) + m), and
  // column blocks interleaved within each column's ld (attention's heads: stride m, the
  // batch's m-row slices side by side, (batch - 1) stride + m <= ld). stride >= m alone let
  // batch 2 of a 2 x 2 output with ld 2 and stride 2 write over batch 1's second column.
  if (g.batch > 1 && g.m > 0 && g.n > 0) {
    using Wide = __int128;  // ld x n and stride x batch may pass int64 for hostile arguments
    const bool blocks = Wide{g.stride_c} >= Wide{g.c.ld} * (g.n - 1) + g.m;
    const bool interleaved = g.stride_c >= g.m && Wide{g.stride_c} * (g.batch - 1) + g.m <= g.c.ld;
    if (g.n == 1 ? g.stride_c < g.m : !blocks && !interleaved) {
      return invalid("batch stride of C " + std::to_string(g.stride_c) + " makes the outputs overlap (m " +
                     std::to_string(g.m) + ", n " + std::to_string(g.n) + ", ldc " + std::to_string(g.c.ld) +
                     ": the stride must be >= ldc (n - 1) + m, or the batch's m-row slices must fit in ldc)");
    }
  }
  const bool wants_bias =
      g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kBiasGeluAux;
  if (wants_bias && g.m > 0 && !g.bias) return invalid("the epilogue needs a bias (m elements)");
  const bool wants_aux = g.epilogue == Epilogue::kBiasGeluAux || g.epilogue == Epilogue::kDGeluBgrad ||
                         g.epilogue == Epilogue::kDGelu;
  if (wants_aux && g.m > 0 && g.n > 0) {
    if (!g.aux) return invalid("the epilogue needs aux (the m x n pre-activation)");
    if (g.aux_ld < g.m || g.aux_ld % 8 != 0) {
      return invalid("aux_ld " + std::to_string(g.aux_ld) + " must be a multiple of 8 and >= m (cuBLASLt's rule)");
    }
  }
  const bool wants_dbias = g.epilogue == Epilogue::kDGeluBgrad || g.epilogue == Epilogue::kBgradB;
  if (wants_dbias && g.m > 0 && g.n > 0 && !g.dbias) return invalid("the epilogue needs dbias (its output)");
  if ((wants_aux || wants_dbias) && g.beta != 0.0f) return invalid("beta must be 0 with a gradient or aux epilogue");
  if (g.c_in != nullptr && g.beta == 0.0f) return invalid("c_in is read only with beta != 0");
  if (g.c_in != nullptr && g.batch > 1) return invalid("c_in with a batched GEMM");
  if (g.c_in != nullptr && g.c_in != g.c.data && g.m > 0 && g.n > 0) {
    // The same m x n footprint (leading dimension c.ld) at both addresses: the copy or the
    // GPU's epilogue would read what it has already written where they partly overlap.
    const auto span = static_cast<uintptr_t>((g.c.ld * (g.n - 1) + g.m) * static_cast<int64_t>(dtype_size(g.c_dtype)));
    const auto in = reinterpret_cast<uintptr_t>(g.c_in), out = reinterpret_cast<uintptr_t>(g.c.data);
    if (in < out + span && out < in + span) return invalid("c_in partly overlaps C");
  }
  if (wants_dbias && g.k == 0) return invalid("k = 0 with a bias-gradient epilogue");
  return Status::Ok();
}

}  // namespace zdp::kernels
