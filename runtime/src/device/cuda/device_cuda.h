// Internals of the CUDA device shared with the NCCL communicator: the sticky error state
// of a CUDA stream and access to a zdp Stream's cudaStream_t. Not part of the public API.
//
// Positions: every piece of work enqueued on a stream (copy, host task, collective) takes
// the next position number; an event recorded on the stream covers the positions below
// the stream's position at record time. A failure is pinned to the position of the work
// that failed, so an event recorded before that work still reports success, while every
// event recorded after it reports the failure.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp::cuda {

// Thread-safe: written by host callbacks (CUDA's callback thread), the NCCL watchdog and
// the enqueuing threads. Shared (shared_ptr) with callbacks so it outlives the Stream.
class StreamErrorState {
 public:
  explicit StreamErrorState(std::string stream_name) : name_(std::move(stream_name)) {}

  const std::string& name() const { return name_; }
  // Takes the position of one new piece of work.
  uint64_t next_position();
  // The position the next work will take: an event recorded now covers everything below.
  uint64_t position() const;

  // Records that the work at `position` failed. The first status is kept; a later report
  // for an earlier position only moves the failure point earlier.
  void fail(uint64_t position, const Status& status);
  // The first failure, or OK.
  Status error() const;
  // The first failure if it happened at a position below `position`, else OK.
  Status error_before(uint64_t position) const;

 private:
  const std::string name_;
  mutable std::mutex mu_;
  uint64_t next_position_ = 0;
  uint64_t failed_at_ = 0;
  Status error_;
};

// What the communicator needs of a CUDA stream.
struct StreamHandle {
  cudaStream_t stream = nullptr;
  int device_index = -1;
  std::shared_ptr<StreamErrorState> state;
};

// The CUDA side of `stream`; kInvalidArgument when it is not a stream of a CUDA device.
StatusOr<StreamHandle> stream_handle(Stream& stream);

}  // namespace zdp::cuda
