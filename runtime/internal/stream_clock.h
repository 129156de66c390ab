// Timestamps of points in the work of a device's streams, for profiles, with no host
// callback in any stream: the engine's timeline (EngineOptions::trace) marks where each
// collective starts and ends and where the compute stream passes each phase, and reads
// the times once the streams have got there.
//
// CPU: a point marked `now` (the caller is the stream: the engine's CPU compute stream
// is the trainer's thread) is stamped at once; others when the stream's worker reaches
// them (a host task: the CPU's streams are host threads anyway). CUDA: a timing event is
// recorded on the stream and converted to the host's steady_clock through an anchor event
// whose host time was measured when the clock was made (re-anchored on a later event
// whenever every point has been read, so cudaEventElapsedTime's fp32 milliseconds stay
// fine-grained). Times are steady_clock's time_since_epoch in seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp {

class StreamClock {
 public:
  virtual ~StreamClock() = default;
  // Marks point `id` at the current end of `stream`'s work (`now`: see above; CUDA
  // ignores it). A failure only loses the point; the caller may ignore it.
  virtual Status mark(Stream& stream, uint64_t id, bool now) = 0;
  // The points reached since the last call, (id, seconds), each stream's in mark order.
  // Points not reached yet come with a later call. Never waits.
  virtual std::vector<std::pair<uint64_t, double>> take() = 0;
};

// A clock for the streams of `device` (CUDA: kUnavailable in builds without CUDA).
StatusOr<std::unique_ptr<StreamClock>> create_stream_clock(Device& device);

}  // namespace zdp
