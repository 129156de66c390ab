// Waiting on a nonblocking NCCL communicator (ncclConfig_t::blocking = 0) with a deadline,
// shared by its initialisation (comm_nccl_init.cc) and its collectives (comm_nccl.cc):
// no call into NCCL may hang forever.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <string>

namespace zdp::nccl {

using Clock = std::chrono::steady_clock;

// "300 s", "1.5 s", "250 ms".
std::string format_duration(std::chrono::milliseconds d);

enum class WaitEnd { kSettled, kTimedOut, kInterrupted };

// Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress, `deadline`
// passes or `*interrupt` becomes true. Returns the settled state (ncclInProgress when it
// did not settle). Sleeps 20 us at first, doubling up to 1 ms.
ncclResult_t wait_while_in_progress(ncclComm_t comm, Clock::time_point deadline, const std::atomic<bool>* interrupt,
                                    WaitEnd* end);

}  // namespace zdp::nccl
