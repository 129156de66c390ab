// Host helpers shared by the kernels: names of modes and the decay-table check.
#include "kernels/common.h"

#include <cmath>
#include <string>

namespace zdp::kernels {

const char* to_string(Rounding rounding) {
  switch (rounding) {
    case Rounding::kNearest: return "nearest";
    case Rounding::kStochastic: return "stochastic";
  }
  return "?";
}

Status validate_segments(const DecaySegment* segments, int64_t num) {
  if (num < 0 || (num > 0 && !segments)) {
    return Status(StatusCode::kInvalidArgument, "decay segments: null table or negative count");
  }
  for (int64_t i = 0; i < num; ++i) {
    const DecaySegment& s = segments[i];
    if (s.begin < 0 || s.end <= s.begin || !std::isfinite(s.weight_decay)) {
      return Status(StatusCode::kInvalidArgument,
                    "decay segment " + std::to_string(i) + " [" + std::to_string(s.begin) + ", " +
                        std::to_string(s.end) + ") is empty, negative or has a non-finite weight decay");
    }
    if (i > 0 && segments[i - 1].end > s.begin) {
      return Status(StatusCode::kInvalidArgument, "decay segments " + std::to_string(i - 1) + " and " +
                                                      std::to_string(i) + " overlap or are out of order");
    }
  }
  return Status::Ok();
}

}  // namespace zdp::kernels
