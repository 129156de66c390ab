// Runs a function as K real rank processes (fork), around a TCP rendezvous store served
// by a process of its own: how multi-process tests and benchmarks get real ranks on
// loopback without the launcher. Gloo state must be created inside `body` (after fork).
//
// Fork safety (docs/design.md, "Fork safety"): a child forked from a process that runs
// other threads may inherit a lock one of them held (malloc's, the sanitizers', the
// logger's) and hang on it. So the caller must be single-threaded: fork_ranks itself
// starts no thread in the caller (the store server runs in a forked process), and a
// caller that runs threads (a CPU device, an OpenMP pool, a store server of its own) gets
// every rank refused with the threads named, instead of a hang. Start threads inside
// `body`, or after fork_ranks returns and stop them before the next call.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::testing {

struct RankResult {
  int rank = 0;
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that ended the process, 0 if it exited
  bool timed_out = false;  // killed by fork_ranks because the deadline passed
  std::string error;       // why the rank never ran (threaded caller, no store, fork failed)
  bool ok() const { return error.empty() && signal == 0 && exit_code == 0 && !timed_out; }
  std::string describe() const;  // "rank 2: exit 1", "rank 1: killed by signal 9", "rank 0: not started: ..."
};

struct ForkOptions {
  // Ranks still running at the deadline are killed and reported as timed out.
  std::chrono::milliseconds deadline{std::chrono::seconds(120)};
  // How long a rank waits for the store to accept its connection.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(20)};
};

// What a rank runs. An OK status exits 0; an error is printed (with the rank) and exits 1;
// an uncaught exception exits 2.
using RankBody = std::function<Status(int rank, int world_size, Store& store)>;

// Forks `world_size` processes running `body`, waits for all of them, returns one result
// per rank (index = rank). The calling process must be single-threaded (see above).
std::vector<RankResult> fork_ranks(int world_size, const RankBody& body, const ForkOptions& options = {});

// Empty when every rank is ok(); otherwise one line per failed rank.
std::string describe_failures(const std::vector<RankResult>& results);

}  // namespace zdp::testing
