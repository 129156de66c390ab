// Gradient sum of squares and non-finite flag on the CPU, in the order kernels/grad_check.h
// defines: chunk partials in parallel (each one's order fixed), then a serial pairwise fold.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu_parallel.h"
#include "kernels/grad_check.h"

namespace zdp::kernels {
namespace {

struct ChunkResult {
  float sum_sq;
  uint32_t nonfinite;
};

template <typename T>
ZDP_CPU_CLONES ChunkResult check_chunk(const T* __restrict x, int64_t n, float scale) {
  constexpr int kV = kGradVecWidth<T>;
  constexpr int kW = kGradLanes * kV;
  float acc[kW] = {};
  uint32_t bad = 0;
  int64_t row = 0;
  for (; row + kW <= n; row += kW) {  // full rows: one vectorised pass each
    for (int k = 0; k < kW; ++k) {
      const float f = to_f32(x[row + k]);
      bad |= is_nonfinite(f) ? 1u : 0u;
      acc[k] = acc[k] + scaled_square(f, scale);
    }
  }
  for (int k = 0; row + k < n; ++k) {  // the last, partial row (absent elements add nothing)
    const float f = to_f32(x[row + k]);
    bad |= is_nonfinite(f) ? 1u : 0u;
    acc[k] = acc[k] + scaled_square(f, scale);
  }
  // Each lane's V registers, then the lanes, fold by halving.
  float lanes[kGradLanes];
  for (int l = 0; l < kGradLanes; ++l) {
    float* a = acc + l * kV;
    for (int s = kV / 2; s >= 1; s /= 2) {
      for (int i = 0; i < s; ++i) a[i] = a[i] + a[i + s];
    }
    lanes[l] = a[0];
  }
  for (int s = kGradLanes / 2; s >= 1; s /= 2) {
    for (int l = 0; l < s; ++l) lanes[l] = lanes[l] + lanes[l + s];
  }
  return ChunkResult{lanes[0], bad};
}

template <typename T>
GradStats check_slice(const T* x, int64_t count, float scale) {
  const int64_t chunks = (count + kGradChunk - 1) / kGradChunk;
  std::vector<float> partials(static_cast<size_t>(chunks));
  uint32_t bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (chunks > 4)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kGradChunk;
    const ChunkResult r = check_chunk(x + begin, std::min(kGradChunk, count - begin), scale);
    partials[static_cast<size_t>(c)] = r.sum_sq;
    bad |= r.nonfinite;
  }
  GradStats stats;
  stats.sum_sq = fold_adjacent_pairs(partials.data(), chunks);
  stats.nonfinite = bad ? 1.0f : 0.0f;
  return stats;
}

}  // namespace

Status grad_check_cpu(const GradCheckArgs& a) {
  if (a.count < 0 || !a.out || (a.count > 0 && !a.grad)) {
    return Status(StatusCode::kInvalidArgument,
                  "grad_check: null grad/out or negative count (" + std::to_string(a.count) + ")");
  }
  if (a.count == 0) {
    *a.out = GradStats{};
    return Status::Ok();
  }
  return dispatch_float(a.dtype, "grad_check", [&](auto t) {
    using T = decltype(t);
    *a.out = check_slice(static_cast<const T*>(a.grad), a.count, a.scale);
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
