// What a loaded checkpoint's values must be, checked on the host as the bytes pass on
// their way to the device (no kernel, no synchronisation, and the tensor can be named): a
// diverged run's checkpoint holds NaN or infinity, which a load would carry into every
// later update, and a negative second moment (AdamW's exp_avg_sq) makes its square root
// NaN at the first one.
#pragma once

#include <cstdint>

#include "zdp/safetensors.h"
#include "zdp/status.h"

namespace zdp::checkpoint {

enum class ValueRule { kFinite, kFiniteNonNegative };

// One piece of a tensor set (a run of whole fp32 values from data offset `offset` of
// `file`), fed in order in parts of any size: a checksum chunk (SaveOptions::chunk_bytes,
// any size) may end inside a value, whose bytes are then carried to the next part.
class ValueCheck {
 public:
  ValueCheck(const safetensors::Reader& file, int64_t offset, ValueRule rule)
      : file_(file), rule_(rule), at_(offset) {}
  // The piece's next `n` bytes. kInvalidArgument naming the file, the tensor, the element
  // and the value for the first value the rule refuses.
  Status feed(const char* bytes, int64_t n);

 private:
  Status check_whole(const char* bytes, int64_t n);  // n a multiple of 4, from at_
  Status refuse(int64_t at, float value) const;

  const safetensors::Reader& file_;
  ValueRule rule_;
  int64_t at_;  // data offset of the next byte fed
  char carry_[4] = {};
  int carry_n_ = 0;
};

}  // namespace zdp::checkpoint
