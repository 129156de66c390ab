// Whole decimal integers from text zdp did not write itself: environment variables, test
// hooks, values another rank put in the store. One place, so that "", "12x", " 12", "+3"
// and a number past its range are refused everywhere alike (strtol accepts the space and
// the plus and saturates on overflow; std::stoll throws).
#pragma once

#include <cstdint>
#include <string_view>

namespace zdp {

// True when all of `text` is an optional '-' followed by digits, with a value in [lo, hi];
// then *out holds the value. False, and *out untouched, for anything else.
bool parse_decimal(std::string_view text, int64_t lo, int64_t hi, int64_t* out);

// The same for any int, from a C string that may be null (an unset environment variable:
// false).
bool parse_int(const char* text, int* out);

}  // namespace zdp
