// parse_decimal (parse_decimal.h).
#include "core/internal/parse_decimal.h"

#include <charconv>

namespace zdp {

bool parse_decimal(std::string_view text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  // from_chars takes no leading space or '+', and reports overflow instead of saturating.
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_int(const char* text, int* out) {
  int64_t v = 0;
  if (text == nullptr || !parse_decimal(text, INT32_MIN, INT32_MAX, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace zdp
