// The supervisor's start-up deadline: every rank must be ready (zdp::init's rendezvous
// done, job_keys::rank_ready) within launch.startup_timeout_s, whether it reached the
// store or not; a rank that exits 0 before it is ready, while others have joined, stops
// the job at once.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "zdp/store.h"

namespace zdp::launcher {

struct StartupInputs {
  int world_size = 1;
  int node_rank = 0;
  std::vector<int> local_ranks;
  std::set<int> exited_zero;          // local ranks that have exited 0
  std::chrono::milliseconds elapsed;  // since the ranks were started
  std::chrono::milliseconds timeout;
  std::function<std::string()> note;  // appended to a timeout's reason, if not empty
};

struct StartupCheck {
  bool ready = false;   // every rank is ready: no more checks needed
  std::string failure;  // not empty: stop the job, saying this
  int rank = -1;        // the local rank that left before joining, or -1
};

StartupCheck check_startup_of(Store& store, const StartupInputs& in);

}  // namespace zdp::launcher
