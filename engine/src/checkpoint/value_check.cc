// ValueCheck (value_check.h).
#include "engine/src/checkpoint/value_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace zdp::checkpoint {
namespace {

// A value the rule refuses, from its bits: exponent all ones (infinity, NaN), or with the
// sign rule a negative value other than -0.
bool refused(uint32_t u, bool non_negative) {
  return (u & 0x7f800000u) == 0x7f800000u || (non_negative && u > 0x80000000u);
}

}  // namespace

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
  const std::vector<safetensors::TensorInfo>& tensors = file_.header().tensors;  // ascending offsets
  auto t = std::upper_bound(tensors.begin(), tensors.end(), at,
                            [](int64_t a, const safetensors::TensorInfo& info) { return a < info.begin; });
  const bool named = t != tensors.begin();
  const std::string tensor = named ? std::prev(t)->name : std::string("?");
  const int64_t element = named ? (at - std::prev(t)->begin) / 4 : at / 4;
  std::ostringstream text;
  text << value;
  const bool finite = std::isfinite(value);
  return Status(StatusCode::kInvalidArgument,
                file_.path() + ": tensor '" + tensor + "' element " + std::to_string(element) + " is " + text.str() +
                    (finite ? " (a second moment is never negative): a damaged checkpoint"
                            : ": a checkpoint of a diverged run") +
                    "; resume from an earlier one");
}

}  // namespace zdp::checkpoint
