// Runs this node's ranks of one attempt of a job and watches them (and, on node 0, the
// job's progress: progress_watch.h): a rank that fails, a rank that never checks in, a
// rank whose heartbeat stops, ranks that issue different collectives, a failure reported
// by another node's launcher, or a signal to the launcher stops every local rank (SIGTERM,
// then SIGKILL after a grace period) within seconds; a slow rank is reported.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "launcher/job_stop.h"
#include "launcher/rank_process.h"
#include "zdp/store.h"

namespace zdp::launcher {

struct GroupOptions {
  std::vector<RankSpec> ranks;  // this node's ranks
  int world_size = 1;           // all nodes
  int node_rank = 0;
  std::string log_dir;
  int attempt = 0;
  int console_fd = 1;
  // Draw a live status line under the ranks' output (the console is a terminal).
  bool live_status = false;
  // Follow the job's progress records in the store (node 0): the status line, and in
  // plain output a line when a rank turns slow or silent.
  bool watch_progress = false;
  // Every rank must report ready (zdp::init, dp-check) within this long, or the group
  // stops naming the ranks that never reached the store; 0 disables.
  std::chrono::milliseconds startup_timeout{std::chrono::seconds(120)};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(5)};
  // Ranks that publish heartbeats (zdp::init) and stop doing so for this long are named
  // and the job stopped; desync and stragglers are reported (launcher/liveness.h). 0: off.
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(15)};
  // The lifeline's read end (runtime/internal/lifeline.h) every rank inherits as
  // $ZDP_LIFELINE_FD; -1: none.
  int lifeline_fd = -1;
  // The job's store, scoped to this attempt (for ready keys and the job-failed key).
  // May be null for tests of a single node without rendezvous.
  Store* store = nullptr;
  // At the startup timeout, what else to say: which nodes' launchers never joined
  // (node_claim.h's missing_launchers); may be empty.
  std::function<std::string()> startup_note;
  // How many stop signals the launcher has received: one that comes while the ranks are
  // given stop_grace to stop kills them at once (a second Ctrl-C). May be empty.
  std::function<int()> signals_received;
};

enum class GroupOutcome {
  kSucceeded,
  kRankFailed,
  kRankStalled,  // a rank's heartbeat stopped
  kDesync,       // ranks issued different collectives
  kStartupTimeout,
  kOtherNodeFailed,
  kStoreLost,  // node 0's store gone for good (its launcher died)
  kInterrupted,
  kSpawnFailed
};
const char* to_string(GroupOutcome outcome);

struct GroupResult {
  GroupOutcome outcome = GroupOutcome::kSucceeded;
  std::string reason;          // one line: what happened
  int failed_rank = -1;        // kRankFailed: the first rank that failed
  ExitInfo failed_exit;
  std::vector<std::string> failed_tail;  // its last log lines
  std::string failed_log;      // its log file
  // The job stops for good, whatever launch.max_restarts says: a signal, a rank program
  // that cannot be started, another node's final stop (job_keys::kJobFinal), or node 0's
  // store gone (nobody would meet a restarted attempt).
  bool final_stop = false;
  bool ok() const { return outcome == GroupOutcome::kSucceeded; }
};

// `interrupt` is set (to the signal number) by the launcher's signal handler.
GroupResult run_group(const GroupOptions& options, const std::atomic<int>& interrupt);

}  // namespace zdp::launcher
