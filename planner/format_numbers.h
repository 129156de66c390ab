// printf of up to three numbers into a std::string, for the planner's text tables (one
// helper where plan_command, profile_compare and profile_diff each had a copy).
#pragma once

#include <cstdio>
#include <string>

namespace zdp::launcher {

inline std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[512];  // the longest format, a table's summary line, is under 300
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

}  // namespace zdp::launcher
