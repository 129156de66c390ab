// The checkpoint fault-injection hook for tests (zdp/checkpoint.h, "Fault injection"):
// ZDP_CKPT_FAULT="rank=R,at=POINT[,step=N][,attempt=A][,action=X][,ms=M]" makes rank R
// act at POINT of a save: exit (default: _exit(86)), kill (SIGKILL), stop (SIGSTOP: the
// liveness tests' rank frozen mid-write) or slow (sleep M ms, default 5000, then go on).
#pragma once

#include <cstdint>
#include <string>

#include "zdp/status.h"

namespace zdp::checkpoint {

inline constexpr int kFaultExitCode = 86;

struct FaultSpec {
  int rank = -1;
  std::string at;     // create | write | checksum | commit | latest
  int64_t step = -1;  // -1: any
  int attempt = -1;   // -1: any
  std::string action = "exit";  // exit | kill | stop | slow
  int64_t ms = 5000;            // slow
};

// Parses the variable's value. kInvalidArgument names the bad part.
StatusOr<FaultSpec> parse_fault(const std::string& text);

// Called by a save at `point`: when $ZDP_CKPT_FAULT matches (rank, point, step, and
// $ZDP_ATTEMPT), logs what it does and does it; otherwise returns OK. A malformed
// variable is an error (so a typo does not silently test nothing).
Status fault_point(const char* point, int rank, int64_t step);

// kInvalidArgument when $ZDP_CKPT_FAULT names this rank at 'commit' or 'latest' and this
// rank does not create checkpoints (`creator`): only the creating rank reaches those
// points, so the fault would silently test nothing. OK otherwise (and when unset).
Status check_fault_target(int rank, bool creator);

}  // namespace zdp::checkpoint
