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
  }
  return "?";
}

std::string describe(const GemmArgs& g) {
  std::ostringstream os;
  os << "gemm " << to_string(g.a.trans) << "," << to_string(g.b.trans) << " m=" << g.m << " n=" << g.n
     << " k=" << g.k << " " << to_string(g.ab_dtype) << "->" << to_string(g.c_dtype) << " "
     << to_string(g.epilogue);
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
  const bool wants_bias = g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu;
  if (wants_bias && g.m > 0 && !g.bias) return invalid("the epilogue needs a bias (m elements)");
  return Status::Ok();
}

}  // namespace zdp::kernels
