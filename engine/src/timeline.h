// The engine's timeline (EngineOptions::trace): points of its two streams, timed where
// the streams are (runtime/internal/stream_clock.h), never by a host callback in a
// stream. Collective points go on the communication stream around each collective;
// compute points on the compute stream (CPU: stamped at once, the calling thread being
// the compute stream; CUDA: a timing event). Engine::timeline() and zdp::Profiler read it;
// a point appears once its stream has reached it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/src/exec.h"
#include "runtime/internal/stream_clock.h"
#include "zdp/engine.h"

namespace zdp {

class Timeline {
 public:
  explicit Timeline(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  // The streams the points are taken on (finalize()); before that, points are dropped.
  // REQUIRES: `exec` outlives the timeline's use.
  Status attach(Exec& exec);
  // The iteration the next points belong to: step() calls completed, skipped ones too.
  int64_t iteration() const { return iteration_; }
  void end_iteration() { ++iteration_; }

  // A collective point of bucket `bucket`, on the communication stream.
  void collective(TimelineEvent::Kind kind, int bucket, CollectiveOp op, int64_t bytes);
  // A point of the compute stream. kIterationEnd belongs to the iteration just ended.
  void compute(TimelineEvent::Kind kind, int bucket = -1, CollectiveOp op = CollectiveOp::kAllReduce);

  // The points reached so far (each stream's in order), left in place / removed.
  std::vector<TimelineEvent> copy();
  std::vector<TimelineEvent> take();

 private:
  void mark(Stream& stream, const TimelineEvent& event, bool now);
  void collect_locked();  // moves the points the streams reached into events_

  const bool enabled_;
  Exec* exec_ = nullptr;
  std::unique_ptr<StreamClock> clock_;
  int64_t iteration_ = 0;
  // Between the trainer's kOutsideBegin and kOutsideEnd: points are tagged step -1. Set on
  // the trainer's thread, read where collectives are issued.
  std::atomic<bool> outside_{false};
  std::mutex mu_;
  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, TimelineEvent> marked_;  // not reached yet
  std::vector<TimelineEvent> events_;
};

}  // namespace zdp
