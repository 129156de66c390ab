// The sticky error state of a device stream, by position, shared by the CUDA device and
// the NCCL communicator (no CUDA in it, so the CPU build compiles and tests it).
//
// Positions: every piece of work enqueued on a stream (copy, host task, collective) takes
// the next position number; an event recorded on the stream covers the positions below
// the stream's position at record time. A failure is pinned to the position of the work
// that failed, so an event recorded before that work still reports success, while every
// event recorded after it reports the failure.
//
// Waits between streams: when stream A waits for an event of stream B (on the GPU, with
// no host involvement), A's state records a link "A's work from here on depends on B's
// work below q". A failure B records for a position below q, now or later, then counts
// as A's failure from that point, found when A's state is queried (error(), an event of
// A, A's synchronize). So the failure travels from the communication stream to the
// compute stream without a host callback in either stream.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
  // This stream's work from here on waits for `other`'s work below `other_position` (see
  // the file comment); the wait takes the next position, so work and events after it see
  // the link and those before it do not. Links to one stream are bounded (at most
  // kMaxLinks; beyond that the two oldest merge into one that starts at the older one's
  // position: conservative, an inherited failure may then be reported a little early).
  void depend_on(const std::shared_ptr<StreamErrorState>& other, uint64_t other_position);

  // The first failure (its own, else one inherited through a link), or OK.
  Status error() const;
  // The first failure that affects work below `position` (its own pinned below it, or one
  // of a stream it waited for before `position`), else OK.
  Status error_before(uint64_t position) const;

  static constexpr int kMaxLinks = 16;

 private:
  struct Link {
    uint64_t at = 0;  // this stream's position when it started waiting
    std::weak_ptr<StreamErrorState> other;
    uint64_t other_at = 0;  // it waited for the other stream's work below this
  };
  // `depth` bounds the walk through links (streams that wait for each other in turn).
  Status error_before(uint64_t position, int depth) const;

  const std::string name_;
  mutable std::mutex mu_;
  uint64_t next_position_ = 0;
  uint64_t failed_at_ = 0;
  Status error_;
  std::vector<Link> links_;  // in `at` order
};

}  // namespace zdp::cuda
