// RankProgress: what a rank's heartbeat reports about it, shared by its Context (which
// the trainer tells the step) and its HeartbeatPublisher (which reads it every beat).
// At every step boundary it notes how many collectives the rank had issued and their
// fingerprint: every rank passes the same boundary after the same collectives, so
// launchers compare these marks to catch ranks that issued different collectives even
// when nothing hangs.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "runtime/internal/heartbeat.h"
#include "zdp/comm.h"

namespace zdp::detail {

class RankProgress {
 public:
  // REQUIRES: `comm` outlives this object's use of it (the Context orders its teardown).
  void set_comm(const Communicator* comm) {
    comm_.store(comm);
    changed_.store(true);
  }
  // True once after set_comm: the heartbeat publishes at once (reports then know the
  // rank has a communicator even when it stops within its first beat).
  bool take_changed() { return changed_.exchange(false); }
  const Communicator* comm() const { return comm_.load(); }

  void set_step(int64_t step) {
    step_.store(step);
    const Communicator* comm = comm_.load();
    if (comm == nullptr) return;
    const CommProgress p = comm->progress();
    std::lock_guard<std::mutex> lock(mu_);
    marks_.push_back(StepMark{step, p.issued, p.fingerprint});
    if (marks_.size() > kMarks) marks_.pop_front();
  }
  int64_t step() const { return step_.load(); }
  std::vector<StepMark> marks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::vector<StepMark>(marks_.begin(), marks_.end());
  }

  // Marks kept (and published): enough that two ranks' heartbeats, taken at different
  // moments, share a step unless the steps are far faster than the heartbeats.
  static constexpr size_t kMarks = 8;

 private:
  std::atomic<int64_t> step_{-1};
  std::atomic<const Communicator*> comm_{nullptr};
  std::atomic<bool> changed_{false};
  mutable std::mutex mu_;
  std::deque<StepMark> marks_;
};

}  // namespace zdp::detail
