// Casts and in-place scaling on the CPU: OpenMP blocks of plain loops over cast_element()
// and scale_element() (kernels/cast.h).
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cast.h"
#include "kernels/cpu_parallel.h"

namespace zdp::kernels {

namespace {

template <typename S, typename D>
ZDP_CPU_CLONES void cast_range(const S* __restrict src, D* __restrict dst, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = cast_element<S, D>(src[i]);
}

template <typename T>
ZDP_CPU_CLONES void scale_range(T* __restrict data, int64_t begin, int64_t end, float scale) {
  for (int64_t i = begin; i < end; ++i) data[i] = scale_element(data[i], scale);
}

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

Status invalid(const std::string& what) { return Status(StatusCode::kInvalidArgument, what); }

}  // namespace

Status check_cast_args(const CastArgs& a) {
  if (a.count < 0) return invalid("cast: count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (!a.src || !a.dst)) return invalid("cast: null src or dst");
  if (!is_float_dtype(a.src_dtype) || !is_float_dtype(a.dst_dtype)) {
    return invalid(std::string("cast: ") + to_string(a.src_dtype) + " -> " + to_string(a.dst_dtype) +
                   " (only fp32, bf16 and fp16)");
  }
  if (a.src == a.dst && a.src_dtype != a.dst_dtype) {
    return invalid("cast: in-place cast between different dtypes");
  }
  return Status::Ok();
}

Status check_scale_args(const ScaleArgs& a) {
  if (a.count < 0) return invalid("scale: count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && !a.data) return invalid("scale: null data");
  if (!is_float_dtype(a.dtype)) return invalid(std::string("scale: dtype ") + to_string(a.dtype));
  return Status::Ok();
}

Status cast_cpu(const CastArgs& a) {
  ZDP_RETURN_IF_ERROR(check_cast_args(a));
  if (a.count == 0 || a.src == a.dst) return Status::Ok();
  return dispatch_float(a.src_dtype, "cast src", [&](auto s) {
    using S = decltype(s);
    return dispatch_float(a.dst_dtype, "cast dst", [&](auto d) {
      using D = decltype(d);
      const S* __restrict src = static_cast<const S*>(a.src);
      D* __restrict dst = static_cast<D*>(a.dst);
      cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
        if constexpr (std::is_same_v<S, D>) {
          std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin) * sizeof(S));
        } else {
          cast_range(src, dst, begin, end);
        }
      });
      return Status::Ok();
    });
  });
}

Status cast_stochastic_cpu(const StochasticCastArgs& a) {
  if (a.count < 0) return invalid("stochastic cast: count " + std::to_string(a.count) + " < 0");
  if (a.count > 0 && (!a.src || !a.dst)) return invalid("stochastic cast: null src or dst");
  if (a.dst_dtype != DType::kBF16 && a.dst_dtype != DType::kF16) {
    return invalid(std::string("stochastic cast: fp32 -> ") + to_string(a.dst_dtype) + " (only bf16 and fp16)");
  }
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.dst_dtype, "stochastic cast dst", [&](auto d) {
    using D = decltype(d);
    D* __restrict dst = static_cast<D*>(a.dst);
    // The optimizer's own update loop with the identity as its update: the same tiles,
    // bits and rounding as the step that wrote the parameters, by construction.
    cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
      cpu::update_loop<float, D>(a.src, dst, begin, end, Rounding::kStochastic, a.seed, a.step,
                                 static_cast<int64_t>(a.first_index), [](int64_t, float p) { return p; });
    });
    return Status::Ok();
  });
}

Status scale_cpu(const ScaleArgs& a) {
  ZDP_RETURN_IF_ERROR(check_scale_args(a));
  if (a.count == 0) return Status::Ok();
  return dispatch_float(a.dtype, "scale", [&](auto t) {
    using T = decltype(t);
    T* __restrict data = static_cast<T*>(a.data);
    const float scale = a.scale;
    cpu::parallel_blocks(a.count, cpu::kBlockElements, [&](int64_t begin, int64_t end) {
      scale_range(data, begin, end, scale);
    });
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
