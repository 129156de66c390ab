// The engine's timeline (EngineOptions::trace): collective points taken on the host when
// the communication stream reaches them, compute points where the compute stream is (CPU:
// at once, the calling thread being the compute stream; CUDA: a host callback when the
// stream gets there). Engine::timeline() and zdp::Profiler read it.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/src/exec.h"
#include "zdp/engine.h"

namespace zdp {

class Timeline {
 public:
  explicit Timeline(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  // The streams the points are taken on (finalize()); before that, compute points are
  // dropped. REQUIRES: `exec` outlives the points in flight on its streams.
  void attach(Exec& exec) { exec_ = &exec; }
  // The iteration the next points belong to: step() calls completed, skipped ones too.
  int64_t iteration() const { return iteration_; }
  void end_iteration() { ++iteration_; }

  // A collective point of bucket `bucket`, enqueued on the communication stream.
  void collective(TimelineEvent::Kind kind, int bucket, CollectiveOp op, int64_t bytes);
  // A point of the compute stream. kIterationEnd belongs to the iteration just ended.
  void compute(TimelineEvent::Kind kind, int bucket = -1, CollectiveOp op = CollectiveOp::kAllReduce);

  std::vector<TimelineEvent> copy() const;
  std::vector<TimelineEvent> take();

 private:
  void add(TimelineEvent event);

  const bool enabled_;
  Exec* exec_ = nullptr;
  int64_t iteration_ = 0;
  mutable std::mutex mu_;
  std::vector<TimelineEvent> events_;
};

}  // namespace zdp
