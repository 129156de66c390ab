// $ZDP_TEST_COMM: a fault or a desync injected into one collective of one rank, for the
// tests of liveness and desync detection (tests/faults/). Read once by every
// communicator; never set it in a real job.
//   "rank=R,seq=N,desync=op|reduce|count|dtype|tag|order"  rank R issues collective #N
//       differently: a barrier instead, max instead of sum (or the reverse), one element
//       fewer, bf16 instead of fp32 (twice the count, the same bytes), another tag, or
//       swapped with #N+1 (held back until the next call is issued: choose an N whose
//       next call follows without a wait, e.g. one of a step's bucket reductions).
//       Buffers are never overrun.
//   "rank=R,seq=N,action=stop|kill|slow|drop[,ms=M]"  right after rank R enqueues #N:
//       SIGSTOP itself, SIGKILL itself, sleep M ms (default 5000), or abort its
//       communicator (its connections close under its peers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zdp/comm.h"
#include "zdp/status.h"

namespace zdp::detail {

struct TestHook {
  int rank = -1;
  uint64_t seq = 0;
  std::string desync;  // empty, or what to change
  std::string action;  // empty, or what to do
  int64_t ms = 5000;   // slow
  // "order": the call held back until the next one has been issued.
  bool holding = false;
  CollectiveDesc held;
  const void* held_send = nullptr;
  void* held_recv = nullptr;
  std::shared_ptr<const AllToAllShape> held_shape;
  Stream* held_stream = nullptr;
};

// kInvalidArgument naming the variable and what is wrong.
StatusOr<TestHook> parse_test_hook(const std::string& text);

// Changes `desc` (rank's collective #hook.seq) as the hook says ("order" is done by the
// communicator). True when it changed something.
bool apply_desync(const TestHook& hook, int rank, CollectiveDesc& desc);

// Runs the hook's action when `desc` is rank's collective #hook.seq. `abort` aborts the
// communicator (drop).
void run_action(const TestHook& hook, int rank, const CollectiveDesc& desc, Communicator& comm);

}  // namespace zdp::detail
