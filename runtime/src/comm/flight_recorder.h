// FlightRecorder: a communicator's last collectives (what each rank prints when the job
// fails) and its progress (what its heartbeat publishes). Numbering happens here too,
// under the same lock, so that the fingerprint follows the sequence numbers exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "zdp/comm.h"

namespace zdp::detail {

class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  explicit FlightRecorder(size_t capacity);

  // Gives `desc` the next sequence number and records it as enqueued. Returns the number.
  uint64_t enqueue(CollectiveDesc& desc);
  // Replaces the description of collective `seq` (a test hook changed it after numbering).
  void amend(uint64_t seq, const CollectiveDesc& desc);
  void started(uint64_t seq);
  void finished(uint64_t seq, bool ok);

  std::vector<CollectiveRecord> records() const;  // oldest first
  uint64_t issued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_;
  }
  CommProgress progress() const;

 private:
  CollectiveRecord* find(uint64_t seq);  // REQUIRES: mu_ held; null once overwritten

  mutable std::mutex mu_;
  std::vector<CollectiveRecord> ring_;  // collective s at s % size
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  std::set<uint64_t> unfinished_;
  Clock::time_point last_end_;
  uint64_t fingerprint_ = 0;  // over every collective issued so far
};

// The term a collective adds to a fingerprint: its number and its signature, so that two
// collectives issued in swapped order change the sum.
uint64_t fingerprint_term(const CollectiveDesc& desc);

}  // namespace zdp::detail
