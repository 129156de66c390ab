// The launcher's side of the liveness channel (runtime/internal/heartbeat.h): reads every
// rank's heartbeat from the job store and judges them, independently of collective
// timeouts:
// - stalled: a local rank whose heartbeat has not changed for heartbeat_timeout (a
//   stopped, frozen or swapped-out process) is named, with where it was and who waits
//   for it, and the job is stopped;
// - desync: two ranks at the same collective number with different collectives, or
//   two ranks that issued different collectives before the same step, are named with
//   both descriptions, and the job is stopped;
// - straggler: a local rank (node 0's launcher: any rank) that is alive but has not yet
//   issued the collective its peers have waited at for half the timeout is reported
//   (once), not stopped.
// When a rank fails (e.g. its collective timed out), a rank whose heartbeat stopped
// before is named as the likely cause (culprit()), so the healthy peer is not blamed.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "runtime/internal/heartbeat.h"
#include "zdp/store.h"

namespace zdp::launcher {

using LivenessClock = std::chrono::steady_clock;

// One rank's heartbeat as this launcher saw it.
struct RankBeat {
  bool seen = false;
  HeartbeatRecord record;
  LivenessClock::time_point changed;  // when record.beat last changed, by this launcher's clock
};

enum class Verdict { kNone, kStalled, kDesync, kStraggler };

struct Finding {
  Verdict verdict = Verdict::kNone;
  int rank = -1;  // the stalled or slow rank; desync: one of the two
  std::string message;
};

// Judges one snapshot (pure: the tests feed it). `local[r]`: rank r runs under this
// launcher (stalls and stragglers are reported only for those; desync for any).
// `reported_slow[r]`: the collective number rank r was last reported slow at (updated).
// `stragglers_anywhere` (node 0's launcher): a slow rank on any node is reported.
Finding judge(const std::vector<RankBeat>& beats, const std::vector<bool>& local, LivenessClock::time_point now,
              std::chrono::milliseconds timeout, std::map<int, uint64_t>& reported_slow,
              bool stragglers_anywhere = false);

// The rank (other than `failed`, and other than those `exited` marks: they exited 0)
// whose heartbeat has been still for at least three of its beats (and 1 s), the longest:
// "rank 0 (pid 7, host h) stopped responding 4.1 s ago in step 3, at all_reduce #12
// (...)". When every heartbeat is fresh, the living rank furthest behind the collective
// `failed` was waiting in: "rank 0 (...) was alive but had not reached collective #12
// (...) that rank 1 waited for (...)". Empty when there is none.
// `stale_only`: only a rank whose heartbeat stopped (a live rank behind is no answer yet:
// a rank that just died still looks alive until its heartbeat is stale).
std::string culprit(const std::vector<RankBeat>& beats, int failed, LivenessClock::time_point now,
                    const std::vector<bool>& exited = {}, bool stale_only = false);

class LivenessWatch {
 public:
  // `timeout` 0: disabled (poll() finds nothing). REQUIRES: `store` (attempt-scoped)
  // outlives this. `node_zero`: this launcher reads every rank's heartbeat at each poll and
  // judges the whole job (desyncs, and stragglers wherever they run); another node's reads
  // its own ranks' (their stalls) and the others' only to name a culprit (culprit_of): each
  // of N launchers reading all W heartbeats a second was N x W reads a second at node 0's
  // store (8M at 1024 nodes of 8).
  LivenessWatch(Store& store, int world_size, const std::vector<int>& local_ranks, std::chrono::milliseconds timeout,
                bool node_zero = true);

  // Reads the heartbeats when a read is due, then judges them.
  Finding poll(LivenessClock::time_point now);
  // A local rank that exited 0: its heartbeat stops, and that is no stall; marked in the
  // store too, so that no node's launcher names it as the culprit of a later failure.
  // `mid_job`: ended_mid_job's text, kept in the mark ("mid-job: ...") for culprit_of on
  // every node.
  void exited(int rank, const std::string& mid_job = "");
  // A local rank whose process exited 0: "" when it released its Context first (its own
  // "released" mark: the rank finished) or never published a heartbeat (not a zdp
  // program); else how it was when it went (describe_rank and its last position). Its
  // process ended in the middle of the job: a wrapper script that lost dp-train's exit
  // status, or an exit(0) in the program. Call before exited(rank), which sets the mark.
  std::string ended_mid_job(int rank);
  // Reads the heartbeats now and names the likely cause of `failed`'s failure (culprit()).
  // `peer_caused`: `failed` said another rank was at fault (exit code 3 or 4): only then is
  // a rank that exited 0 mid-job (its exited mark, on any node) named.
  std::string culprit_of(int failed, LivenessClock::time_point now, bool stale_only = false,
                         bool peer_caused = false);
  // Waits (at most `limit`) until every local rank in `running` that publishes
  // heartbeats has printed its flight recorder after the job-failed key was set.
  void wait_for_flight_records(const std::vector<int>& running, std::chrono::milliseconds limit);
  bool enabled() const { return timeout_.count() > 0; }
  // How long after a rank's last beat culprit_of() may first name it: the freshness window
  // of the slowest heartbeat seen (three beats, at least 1 s) plus one read interval.
  // 0 when disabled.
  std::chrono::milliseconds stale_after() const;

 private:
  // This node's ranks, and with `all` the others' too.
  void read(LivenessClock::time_point now, bool all);

  Store& store_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds poll_every_;
  std::vector<bool> local_;
  std::vector<RankBeat> beats_;
  std::map<int, uint64_t> reported_slow_;
  LivenessClock::time_point next_read_;
  const bool node_zero_;
};

}  // namespace zdp::launcher
