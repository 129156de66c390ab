// format_duration (nccl_wait.h).
#include "runtime/src/comm/nccl/nccl_wait.h"

#include <cstdio>

namespace zdp::nccl {

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace zdp::nccl
