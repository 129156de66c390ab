// Node 0's launcher's view of how far the job has come, from the progress records the
// ranks keep in the job's store (runtime/internal/job_progress.h): rank 0's job record
// becomes the status line (bar, step/steps, loss, tokens/s, the whole run's ETA counting
// down between records), and the ranks' own records show a rank that is slow (its
// compute per step well above the other ranks' median) or silent (no new record for much
// longer than its usual interval while the job is training).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/internal/job_progress.h"
#include "zdp/store.h"

namespace zdp::launcher {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kRankInterval{1};  // how often the ranks' records are read
  static constexpr std::chrono::seconds kSilentAfter{30};  // the least silence that is reported
  static constexpr double kSlowFactor = 1.5;  // slow: compute per step over 1.5 x the other ranks' median
  // ... and at least this much more (5 ms): a 0.5 ms step against 0.3 ms is the
  // scheduler's jitter, not a lagging rank, and was reported as one.
  static constexpr double kSlowExcessS = 0.005;
  static constexpr int kSlowRecords = 3;      // ... in this many of its records in a row (not one hiccup)

  explicit ProgressWatch(int world_size);

  // Reads rank 0's record, and every kRankInterval the ranks' own. A missing or malformed
  // record is skipped (the status line keeps the last good one).
  void poll(Store& store, Clock::time_point now);
  // What poll() does with each record read (tests feed records directly).
  void on_job(const JobProgress& job, Clock::time_point now);
  void on_rank(int rank, const RankProgress& p, Clock::time_point now);

  struct Problem {
    int rank = 0;
    std::string kind;  // "slow" or "silent"
    std::string text;  // "rank 1 slow: 48.0 ms compute per step, median 20.0 ms"
  };
  std::vector<Problem> problems(Clock::time_point now) const;

  // "[########......] 120/400  30% | ETA 1m23s | loss 2.3456 | 12.3k tok/s" and the
  // problems; "" before rank 0's first record.
  std::string status_line(Clock::time_point now) const;

 private:
  struct RankState {
    std::optional<RankProgress> last;
    std::string text;          // the record as read: a change is progress
    Clock::time_point changed;
    Clock::duration longest_gap{0};
    int slow_streak = 0;       // records in a row above kSlowFactor x the others' median
    double others_median = 0;  // at the last record
  };
  // The median compute per step of the ranks other than `rank` (0 when none reported).
  double others_median(int rank) const;
  std::optional<JobProgress> job_;
  Clock::time_point job_at_;
  std::vector<RankState> ranks_;
  Clock::time_point next_rank_read_{};
};

}  // namespace zdp::launcher
