// Helpers shared by the NCCL communicator's initialisation (comm_nccl_init.cc) and its
// collectives (comm_nccl.cc): durations in messages, and waiting for a nonblocking
// communicator's call to settle.
#pragma once

#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>

namespace zdp::nccl {

using Clock = std::chrono::steady_clock;

// "300 s", "1.5 s", "250 ms".
std::string format_duration(std::chrono::milliseconds d);

// A nonblocking communicator (ncclConfig_t::blocking = 0) answers a call that is still
// under way with ncclInProgress, and no other NCCL call may be made on it, nor work
// queued on its streams, until ncclCommGetAsyncError stops saying so. This polls it
// until it settles (ncclSuccess or the error), `deadline` passes (ncclInProgress), or
// `give_up` (may be empty) returns true (ncclInProgress). Never blocks inside NCCL.
ncclResult_t settle(ncclComm_t comm, Clock::time_point deadline, const std::function<bool()>& give_up);

}  // namespace zdp::nccl
