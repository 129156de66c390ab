// bias_grad_cpu and the argument checks of kernels/bias_grad.h: the GPU's order, one
// column at a time.
#include <string>
#include <vector>

#include "kernels/bias_grad.h"

namespace zdp::kernels {

Status check_bias_grad(const BiasGradArgs& a) {
  if (a.rows < 0 || a.cols < 0) {
    return Status(StatusCode::kInvalidArgument, "bias_grad: negative shape " + std::to_string(a.rows) + " x " +
                                                    std::to_string(a.cols));
  }
  if (a.cols > 0 && a.db == nullptr) return Status(StatusCode::kInvalidArgument, "bias_grad: null db");
  if (a.rows > 0 && a.cols > 0 && a.dy == nullptr) return Status(StatusCode::kInvalidArgument, "bias_grad: null dy");
  return Status::Ok();
}

Status bias_grad_cpu(const BiasGradArgs& a) {
  ZDP_RETURN_IF_ERROR(check_bias_grad(a));
  return dispatch_float(a.dtype, "bias_grad", [&](auto t) {
    using T = decltype(t);
    const T* dy = static_cast<const T*>(a.dy);
    T* db = static_cast<T*>(a.db);
    const int64_t chunk = bias_grad_row_chunk(a.rows), chunks = bias_grad_chunks(a.rows);
    // Column blocks of 256, so each pass over a row reads contiguous memory.
    constexpr int64_t kCols = 256;
    std::vector<float> lane(static_cast<size_t>(kBiasGradLanes * kCols)), total(static_cast<size_t>(kCols));
    for (int64_t c0 = 0; c0 < a.cols; c0 += kCols) {
      const int64_t width = a.cols - c0 < kCols ? a.cols - c0 : kCols;
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t r0 = k * chunk, r1 = (k + 1) * chunk < a.rows ? (k + 1) * chunk : a.rows;
        for (float& v : lane) v = 0.0f;
        for (int64_t r = r0; r < r1; ++r) {
          float* l = lane.data() + ((r - r0) % kBiasGradLanes) * kCols;
          const T* row = dy + r * a.cols + c0;
          for (int64_t c = 0; c < width; ++c) l[c] += to_f32(row[c]);
        }
        for (int64_t c = 0; c < width; ++c) {
          float s = lane[static_cast<size_t>(c)];
          for (int l = 1; l < kBiasGradLanes; ++l) s += lane[static_cast<size_t>(l * kCols + c)];
          total[static_cast<size_t>(c)] = k == 0 ? s : total[static_cast<size_t>(c)] + s;
        }
      }
      for (int64_t c = 0; c < width; ++c) db[c0 + c] = from_f32<T>(total[static_cast<size_t>(c)]);
    }
    return Status::Ok();
  });
}

}  // namespace zdp::kernels
