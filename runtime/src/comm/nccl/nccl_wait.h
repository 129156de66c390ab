// Time helpers shared by the NCCL communicator's initialisation (comm_nccl_init.cc) and
// its collectives (comm_nccl.cc).
#pragma once

#include <chrono>
#include <string>

namespace zdp::nccl {

using Clock = std::chrono::steady_clock;

// "300 s", "1.5 s", "250 ms".
std::string format_duration(std::chrono::milliseconds d);

}  // namespace zdp::nccl
