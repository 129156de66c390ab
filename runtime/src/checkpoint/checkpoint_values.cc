// ValueCheck (runtime/internal/checkpoint_values.h).
#include "runtime/internal/checkpoint_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "zdp/checkpoint.h"

namespace zdp::checkpoint {
namespace {

// A value the rule refuses, from its bits: exponent all ones (infinity, NaN), or with the
// sign rule a negative value other than -0.
bool refused(uint32_t u, bool non_negative) {
  return (u & 0x7f800000u) == 0x7f800000u || (non_negative && u > 0x80000000u);
}

}  // namespace

ValueRule rule_of_tensor(const std::string& name) {
  const std::string suffix = kExpAvgSqSuffix;
  const bool second_moment = name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return second_moment ? ValueRule::kFiniteNonNegative : ValueRule::kFinite;
}

Status ValueCheck::feed(const char* bytes, int64_t n) {
  // A value split by the previous part: complete it first.
  while (carry_n_ > 0 && n > 0) {
    carry_[carry_n_++] = *bytes++;
    --n;
    ++at_;
    if (carry_n_ == 4) {
      carry_n_ = 0;
      ZDP_RETURN_IF_ERROR(check_whole(carry_, 4));  // at_ has moved past it: check_whole takes it from at_ - 4
    }
  }
  const int64_t whole = n - n % 4;
  at_ += whole;
  ZDP_RETURN_IF_ERROR(check_whole(bytes, whole));
  for (int64_t i = whole; i < n; ++i) carry_[carry_n_++] = bytes[i];
  at_ += n - whole;
  return Status::Ok();
}

Status ValueCheck::check_whole(const char* bytes, int64_t n) {
  // `bytes` are the n bytes just before at_ (feed advances at_ first). One pass of bit
  // tests the compiler vectorises; the slow search only for a part that holds a refusal.
  const bool non_negative = rule_ == ValueRule::kFiniteNonNegative;
  bool any = false;
  for (int64_t i = 0; i < n; i += 4) {
    uint32_t u;
    std::memcpy(&u, bytes + i, 4);  // a part need not be 4-byte aligned in memory
    any |= refused(u, non_negative);
  }
  if (!any) return Status::Ok();
  for (int64_t i = 0; i < n; i += 4) {
    uint32_t u;
    std::memcpy(&u, bytes + i, 4);
    if (!refused(u, non_negative)) continue;
    float v;
    std::memcpy(&v, &u, 4);
    return refuse(at_ - n + i, v);
  }
  return Status::Ok();
}

Status ValueCheck::refuse(int64_t at, float value) const {
  const std::vector<safetensors::TensorInfo>& tensors = header_.tensors;  // ascending offsets
  auto t = std::upper_bound(tensors.begin(), tensors.end(), at,
                            [](int64_t a, const safetensors::TensorInfo& info) { return a < info.begin; });
  const bool named = t != tensors.begin();
  const std::string tensor = named ? std::prev(t)->name : std::string("?");
  const int64_t element = named ? (at - std::prev(t)->begin) / 4 : at / 4;
  std::ostringstream text;
  text << value;
  const bool finite = std::isfinite(value);
  const std::string what = path_ + ": tensor '" + tensor + "' element " + std::to_string(element) + " is " + text.str();
  if (purpose_ == ValueCheckFor::kSave) {
    return Status(StatusCode::kInvalidArgument,
                  what + (finite ? " (a second moment is never negative)" : "") +
                      ": the run has diverged, and no load could take this checkpoint: it is not saved (the earlier "
                      "ones are kept)");
  }
  return Status(StatusCode::kInvalidArgument,
                what + (finite ? " (a second moment is never negative): a damaged checkpoint" : ": a checkpoint of a diverged run") +
                    "; resume from an earlier one");
}

Status FileValueCheck::feed(int64_t offset, const char* bytes, int64_t n) {
  const std::vector<safetensors::TensorInfo>& tensors = file_.header().tensors;
  while (n > 0 && tensor_ < tensors.size()) {
    const safetensors::TensorInfo& t = tensors[tensor_];
    if (offset >= t.end) {  // past this tensor: the next one, from its start
      ++tensor_;
      check_.reset();
      continue;
    }
    const int64_t skip = std::max<int64_t>(0, t.begin - offset);  // a gap before it (none in zdp's files)
    const int64_t take = std::min(n - std::min(n, skip), t.end - (offset + skip));
    if (take <= 0) break;
    if (t.dtype == "F32") {
      if (check_ == nullptr) check_ = std::make_unique<ValueCheck>(file_, t.begin, rule_of_tensor(t.name));
      ZDP_RETURN_IF_ERROR(check_->feed(bytes + skip, take));
    }
    offset += skip + take;
    bytes += skip + take;
    n -= skip + take;
  }
  return Status::Ok();
}

}  // namespace zdp::checkpoint
