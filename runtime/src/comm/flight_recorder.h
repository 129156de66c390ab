// FlightRecorder: a communicator's last collectives (what each rank prints when the job
// fails) and its progress (what its heartbeat publishes). Numbering happens here too,
// under the same lock, so that the fingerprint follows the sequence numbers exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <map>
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
  // `seq` ended: ran (ok) or was never run (!ok: its stream dropped it).
  void finished(uint64_t seq, bool ok);
  // `seq` ran and failed (a timeout, a lost peer): it stays the rank's current collective
  // in progress(), whatever ends later, so that the heartbeats published until the rank
  // exits still say which collective it was waiting in (NCCL's keep it pending too).
  void failed(uint64_t seq);

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
  // Collectives issued and not finished, by number: their own copy, since a stuck one's
  // ring slot is overwritten once `capacity` later ones are issued.
  struct Unfinished {
    CollectiveDesc desc;
    Clock::time_point enqueued;
    bool failed = false;
  };
  std::map<uint64_t, Unfinished> unfinished_;
  Clock::time_point last_end_;
  uint64_t fingerprint_ = 0;  // over every collective issued so far
};

// The term a collective adds to a fingerprint: its number and its signature, so that two
// collectives issued in swapped order change the sum.
uint64_t fingerprint_term(const CollectiveDesc& desc);

}  // namespace zdp::detail
