// fold_cpu and the argument checks of kernels/fold.h.
#include "kernels/fold.h"

#include <string>

#include "kernels/cast.h"

namespace zdp::kernels {

Status check_fold_args(const FoldArgs& a) {
  if (a.count < 0) return Status(StatusCode::kInvalidArgument, "fold: count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (a.in == nullptr || a.out == nullptr)) {
    return Status(StatusCode::kInvalidArgument, "fold: null input or output");
  }
  if (a.in == a.out && a.in_dtype != a.out_dtype) {
    return Status(StatusCode::kInvalidArgument, "fold: in place between different dtypes");
  }
  // A 16-bit output over the fp32 accumulation: element k's bytes are half of acc[k / 2],
  // which another GPU thread may not have read yet.
  if (a.acc != nullptr && a.out == a.acc && a.out_dtype != DType::kF32) {
    return Status(StatusCode::kInvalidArgument, "fold: out aliases the fp32 accumulation with a 16-bit output");
  }
  return Status::Ok();
}

Status fold_cpu(const FoldArgs& a) {
  ZDP_RETURN_IF_ERROR(check_fold_args(a));
  if (a.acc == nullptr) {  // nothing to add: kernels/ has the cast
    return cast_cpu(CastArgs{a.in, a.in_dtype, a.out, a.out_dtype, a.count});
  }
  return dispatch_float(a.in_dtype, "fold input", [&](auto i) {
    using I = decltype(i);
    return dispatch_float(a.out_dtype, "fold output", [&](auto o) {
      using O = decltype(o);
      // No __restrict: out may alias in or acc (same index only, so the loop is safe).
      const I* in = static_cast<const I*>(a.in);
      O* out = static_cast<O*>(a.out);
      for (int64_t k = 0; k < a.count; ++k) out[k] = fold_element<I, O>(in[k], a.acc[k]);
      return Status::Ok();
    });
  });
}

}  // namespace zdp::kernels
