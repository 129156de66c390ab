// The bounds of zdp's numeric command-line flags (dp-launch, its plan and scale, dp-check,
// dp-data), as CLI11 validators. CLI::Range lets NaN through (both of its comparisons are
// false), and CLI::PositiveNumber lets 1e308 through, which a flag's unit then turns into
// infinity (GFLOP/s x 1e9); its refusal of 0 also reads "not in range 0 to 1.8e308".
// Header-only: only the commands include it, and they link CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zdp {

// A finite number in [lo, hi]; NaN and infinities are refused.
inline CLI::Validator finite_range(double lo, double hi) {
  char bounds[64];
  std::snprintf(bounds, sizeof(bounds), "[%g, %g]", lo, hi);
  const std::string range = bounds;
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(v) || errno == ERANGE || v < lo || v > hi) return text + " is not a finite number in " + range;
        return std::string();
      },
      "NUMBER in " + range);
}

// A decimal integer in [lo, hi] (CLI::Range's, with the bounds said as integers). A
// leading 0 is refused: CLI11 converts integers with strtoll's base 0, which reads "0100"
// as octal 64 and "010" as 8 (--vocab 0100 made a vocabulary of 64), and "0x10" as hex.
inline CLI::Validator integer_range(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE) return "'" + text + "' is not an integer";
        const size_t digits = text.find_first_not_of("+-");
        if (digits != std::string::npos && text[digits] == '0' && text.size() > digits + 1) {
          return "'" + text + "' has a leading 0 (which some tools read as octal): write " + std::to_string(v);
        }
        if (v < lo || v > hi) return text + " is not in " + range;
        return std::string();
      },
      "INT in " + range);
}

}  // namespace zdp
