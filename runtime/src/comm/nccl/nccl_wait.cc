// Polling a nonblocking NCCL communicator until it settles or a deadline passes.
#include "runtime/src/comm/nccl/nccl_wait.h"

#include <algorithm>
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

ncclResult_t wait_while_in_progress(ncclComm_t comm, Clock::time_point deadline, const std::atomic<bool>* interrupt,
                                    WaitEnd* end) {
  std::chrono::microseconds pause(20);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclInProgress) {
      *end = WaitEnd::kSettled;
      return state;
    }
    if (interrupt != nullptr && interrupt->load()) {
      *end = WaitEnd::kInterrupted;
      return ncclInProgress;
    }
    if (Clock::now() >= deadline) {
      *end = WaitEnd::kTimedOut;
      return ncclInProgress;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace zdp::nccl
