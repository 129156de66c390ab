// Command-line sizes of the benchmarks: "32M" = 32 x 2^20 (counts of elements and byte
// sizes alike), with an optional binary suffix K, M or G (also k/m/g and KiB/MiB/GiB).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace zdp::bench {

// The size `text` names, or -1 when it is not a number with one of those suffixes.
inline int64_t parse_binary_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return -1;
  const std::string unit(end);
  if (unit == "K" || unit == "k" || unit == "KiB") v *= 1024.0;
  else if (unit == "M" || unit == "m" || unit == "MiB") v *= 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB") v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return -1;
  return static_cast<int64_t>(v);
}

}  // namespace zdp::bench
