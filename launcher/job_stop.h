// The job-failed key every launcher of a job watches (job_keys::kJobFailed): posting the
// first reason, reading whether the stop is for good, and which nodes have left.
#pragma once

#include <string>

#include "zdp/store.h"

namespace zdp::launcher {

// Posts `reason` on the attempt's job-failed key unless another launcher did first: the
// first node's reason stays (a later one, a rank that failed because of the first, must
// not replace it), claimed with one atomic add (a check, then a set, let two nodes that
// failed together both post). `final`: no node restarts this attempt (job_keys::kJobFinal,
// set first, so whoever reads the reason can read it too).
void post_job_failed(Store& store, const std::string& reason, bool final);

// Whether the launcher that stopped this attempt said it is for good (job_keys::kJobFinal).
// A store that no longer answers counts as final: node 0's launcher is gone.
bool stop_is_final(Store& store);

// The nodes other than node 0 and `self` whose ranks all exited 0 in this attempt: their
// launchers have left, so a restarted attempt could never meet them. "" when none, else
// "2, 5".
std::string departed_nodes(Store& store, int nnodes, int self);

}  // namespace zdp::launcher
