// Residual add and GELU on the CPU: plain loops over blocks on the OpenMP team.
#include <string>

#include "kernels/cpu_parallel.h"
#include "kernels/elementwise.h"

namespace zdp::kernels {
namespace {

Status invalid(const char* op, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, std::string(op) + ": " + what);
}

template <typename T, typename Fn>
Status map_blocks(int64_t count, Fn&& fn) {
  cpu::parallel_blocks(count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
  return Status::Ok();
}

}  // namespace

Status check_add(const AddArgs& a) {
  if (a.count < 0) return invalid("add", "count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (!a.a || !a.b || !a.out)) return invalid("add", "a, b and out must be non-null");
  return Status::Ok();
}

Status check_gelu(const GeluArgs& a, bool backward) {
  const char* op = backward ? "gelu_backward" : "gelu";
  if (a.count < 0) return invalid(op, "count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (!a.x || !a.out || (backward && !a.dy))) return invalid(op, "x, out (and dy) must be non-null");
  return Status::Ok();
}

Status check_squared_error(const SquaredErrorArgs& a) {
  if (a.rows < 0 || a.cols < 1) return invalid("squared_error", "rows " + std::to_string(a.rows) + " / cols " + std::to_string(a.cols));
  if (a.rows > 0 && (!a.pred || !a.target || !a.losses)) return invalid("squared_error", "pred, target and losses must be non-null");
  return Status::Ok();
}

Status squared_error_cpu(const SquaredErrorArgs& a) {
  ZDP_RETURN_IF_ERROR(check_squared_error(a));
  return dispatch_float(a.dtype, "squared_error", [&](auto t) {
    using T = decltype(t);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a.rows; ++r) squared_error_row<T>(a, r);
    return Status::Ok();
  });
}

Status add_cpu(const AddArgs& a) {
  ZDP_RETURN_IF_ERROR(check_add(a));
  return dispatch_float(a.dtype, "add", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.a);
    const T* y = static_cast<const T*>(a.b);
    T* out = static_cast<T*>(a.out);
    return map_blocks<T>(a.count, [&](int64_t i) { out[i] = from_f32<T>(to_f32(x[i]) + to_f32(y[i])); });
  });
}

Status gelu_forward_cpu(const GeluArgs& a) {
  ZDP_RETURN_IF_ERROR(check_gelu(a, false));
  return dispatch_float(a.dtype, "gelu", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    T* out = static_cast<T*>(a.out);
    return map_blocks<T>(a.count, [&](int64_t i) { out[i] = from_f32<T>(gelu_tanh(to_f32(x[i]))); });
  });
}

Status gelu_backward_cpu(const GeluArgs& a) {
  ZDP_RETURN_IF_ERROR(check_gelu(a, true));
  return dispatch_float(a.dtype, "gelu_backward", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    T* out = static_cast<T*>(a.out);
    return map_blocks<T>(a.count, [&](int64_t i) { out[i] = from_f32<T>(to_f32(dy[i]) * gelu_tanh_grad(to_f32(x[i]))); });
  });
}

}  // namespace zdp::kernels
