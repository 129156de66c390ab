// StreamErrorState (stream_error_state.h): positions, sticky failures, links between streams.
#include "runtime/src/device/stream_error_state.h"

#include <algorithm>
#include <limits>

namespace zdp::cuda {
namespace {

// Links are followed this many hops deep: the engine's two streams wait for each other in
// turn, and the failure that matters is a hop or two away.
constexpr int kMaxDepth = 8;

}  // namespace

uint64_t StreamErrorState::next_position() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_position_++;
}

uint64_t StreamErrorState::position() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_position_;
}

void StreamErrorState::fail(uint64_t position, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) {
    error_ = status;
    failed_at_ = position;
  } else {
    failed_at_ = std::min(failed_at_, position);
  }
}

void StreamErrorState::depend_on(const std::shared_ptr<StreamErrorState>& other, uint64_t other_position) {
  if (!other || other.get() == this) return;  // own events: stream order covers them
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t at = next_position_;
  int same = 0;
  for (auto it = links_.rbegin(); it != links_.rend(); ++it) {
    if (it->other.lock() != other) continue;
    if (same++ > 0) continue;
    // The newest link to `other` already requires as much, from no later: nothing to add.
    if (other_position <= it->other_at) return;
    if (it->at == at) {  // nothing enqueued since: widen it
      it->other_at = other_position;
      return;
    }
  }
  links_.push_back(Link{at, other, other_position});
  if (same + 1 <= kMaxLinks) return;
  // Merge the two oldest links to `other`: the older one's start, the newer one's reach.
  auto first = links_.end();
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (it->other.lock() != other) continue;
    if (first == links_.end()) {
      first = it;
      continue;
    }
    it->at = first->at;
    links_.erase(first);
    return;
  }
}

Status StreamErrorState::error() const { return error_before(std::numeric_limits<uint64_t>::max(), 0); }

Status StreamErrorState::error_before(uint64_t position) const { return error_before(position, 0); }

Status StreamErrorState::error_before(uint64_t position, int depth) const {
  std::vector<Link> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok() && failed_at_ < position) return error_;
    for (const Link& l : links_) {
      if (l.at < position) links.push_back(l);
    }
  }
  if (depth >= kMaxDepth) return Status::Ok();
  for (const Link& l : links) {  // oldest first: the earliest inherited failure
    const std::shared_ptr<StreamErrorState> other = l.other.lock();
    if (!other) continue;  // that stream is gone, and with it whoever could have failed it
    Status s = other->error_before(l.other_at, depth + 1);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace zdp::cuda
