// What a checkpoint's values must be, checked on the host as the bytes pass between the
// file and the device (no kernel, no synchronisation, and the tensor can be named): a
// diverged run's state holds NaN or infinity, which a load would carry into every later
// update, and a negative second moment (AdamW's exp_avg_sq) makes its square root NaN at
// the first one. The load checks what it reads; the save what it writes (a diverged run's
// save was committed, pruned the last good checkpoint, and no load could take it); and
// dp-ckpt verify what a file holds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zdp/safetensors.h"
#include "zdp/status.h"

namespace zdp::checkpoint {

enum class ValueRule { kFinite, kFiniteNonNegative };

// The rule of an optimizer tensor: second moments (kExpAvgSqSuffix) finite and not
// negative, the rest finite.
ValueRule rule_of_tensor(const std::string& name);

// Whether a refusal speaks to a load (resume from an earlier checkpoint) or a save (the run
// diverged: this one is not written, the earlier ones are kept).
enum class ValueCheckFor { kLoad, kSave };

// One piece of a tensor set (a run of whole fp32 values from data offset `offset` of the
// file at `path` whose header is `header`), fed in order in parts of any size: a checksum
// chunk (SaveOptions::chunk_bytes, any size) may end inside a value, whose bytes are then
// carried to the next part.
class ValueCheck {
 public:
  ValueCheck(const safetensors::Header& header, const std::string& path, int64_t offset, ValueRule rule,
             ValueCheckFor purpose = ValueCheckFor::kLoad)
      : header_(header), path_(path), rule_(rule), purpose_(purpose), at_(offset) {}
  ValueCheck(const safetensors::Reader& file, int64_t offset, ValueRule rule)
      : ValueCheck(file.header(), file.path(), offset, rule) {}
  // The piece's next `n` bytes. kInvalidArgument naming the file, the tensor, the element
  // and the value for the first value the rule refuses.
  Status feed(const char* bytes, int64_t n);

 private:
  Status check_whole(const char* bytes, int64_t n);  // n a multiple of 4, from at_
  Status refuse(int64_t at, float value) const;

  const safetensors::Header& header_;
  const std::string& path_;
  ValueRule rule_;
  ValueCheckFor purpose_;
  int64_t at_;  // data offset of the next byte fed
  char carry_[4] = {};
  int carry_n_ = 0;
};

// Every F32 tensor of `file` by its rule (rule_of_tensor), from its data bytes fed in
// order in parts of any size (dp-ckpt verify's checksum chunks, read once for both).
class FileValueCheck {
 public:
  explicit FileValueCheck(const safetensors::Reader& file) : file_(file) {}
  // `n` bytes from data offset `offset`: at the end of the previous part.
  Status feed(int64_t offset, const char* bytes, int64_t n);

 private:
  const safetensors::Reader& file_;
  size_t tensor_ = 0;                 // the tensor `check_` checks
  std::unique_ptr<ValueCheck> check_;
};

}  // namespace zdp::checkpoint
