// format_duration and settle (nccl_wait.h).
#include "runtime/src/comm/nccl/nccl_wait.h"

#include <cstdio>
#include <thread>

namespace zdp::nccl {

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

ncclResult_t settle(ncclComm_t comm, Clock::time_point deadline, const std::function<bool()>& give_up) {
  // Connections made at a collective's first call take milliseconds: poll tightly at
  // first, then every 1 ms so that a long wait (a peer not there yet) costs no core.
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline || (give_up && give_up())) return ncclInProgress;
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace zdp::nccl
