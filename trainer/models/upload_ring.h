// Host -> device uploads through pinned memory, for GPUs: a copy from pageable memory is
// staged by the driver before cudaMemcpyAsync returns (the host waits for it), so each
// micro-batch's tokens, targets and token index go through a ring of pinned memory
// instead: a host memcpy into the ring, then an asynchronous copy on the stream. The
// host waits only to reuse ring bytes whose copy has not run yet, i.e. when it is a whole
// ring (several micro-batches) ahead of the GPU: bounded run-ahead, not a per-upload wait.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "zdp/device.h"

namespace zdp::trainer {

class UploadRing {
 public:
  explicit UploadRing(Device& device) : device_(device) {}
  // Copies `bytes` from host `src` to device `dst` in `stream`'s order; `src` may be
  // reused as soon as this returns.
  Status upload(Stream& stream, void* dst, const void* src, size_t bytes);

 private:
  struct InFlight {
    int64_t begin = 0, end = 0;  // ring bytes
    std::unique_ptr<Event> copied;
  };
  // Makes the ring hold at least 8 uploads of `bytes` (waiting for every copy first when
  // it has to grow: the first steps only).
  Status reserve(int64_t bytes);
  // Waits for the copies that still read ring bytes [begin, end).
  Status wait_for(int64_t begin, int64_t end);

  Device& device_;
  DeviceBuffer pinned_;
  int64_t head_ = 0;
  std::deque<InFlight> in_flight_;  // oldest first
  std::vector<std::unique_ptr<Event>> free_events_;
};

}  // namespace zdp::trainer
