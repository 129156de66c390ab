// StreamErrorState (stream_error_state.h): positions, sticky failures, links between streams.
#include "runtime/internal/stream_error_state.h"

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
  int same = 0;
  for (auto it = links_.rbegin(); it != links_.rend(); ++it) {
    if (it->other.lock() != other) continue;
    if (same++ > 0) continue;
    // The newest link to `other` already requires as much, from no later: nothing to add.
    if (other_position <= it->other_at) return;
    if (it->at + 1 == next_position_) {  // nothing enqueued since that wait: widen it
      it->other_at = other_position;
      return;
    }
  }
  // The wait takes a position of its own, like any work: everything enqueued after it
  // (a host task checks the failures below its own position) depends on the link.
  links_.push_back(Link{next_position_++, other, other_position});
  if (same + 1 <= kMaxLinks) return;
  // Merge the two oldest links to `other`: the older one's start, the newer one's reach.
  auto first = links_.end();
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (it->other.lock() != other) continue;
    if (first == links_.end()) {
      first = it;
      continue;
    }
    first->other_at = it->other_at;  // in place of the older one: links stay in `at` order
    links_.erase(it);
    return;
  }
}

Status StreamErrorState::error() const { return error_before(std::numeric_limits<uint64_t>::max(), 0); }

Status StreamErrorState::error_before(uint64_t position) const { return error_before(position, 0); }

Status StreamErrorState::error_before(uint64_t position, int depth) const {
  // Per other stream only the latest link before `position` matters: links to one stream
  // reach ever further (depend_on keeps other_at increasing), and a failure below a
  // smaller reach is below the larger one too. So each hop branches once per stream waited
  // for (the engine: one), not once per link.
  std::vector<std::pair<std::shared_ptr<StreamErrorState>, uint64_t>> latest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok() && failed_at_ < position) return error_;
    if (depth >= kMaxDepth) return Status::Ok();
    for (const Link& l : links_) {  // in `at` order
      if (l.at >= position) break;
      std::shared_ptr<StreamErrorState> other = l.other.lock();
      if (!other) continue;  // that stream is gone, and with it whoever could have failed it
      auto it = std::find_if(latest.begin(), latest.end(), [&](const auto& e) { return e.first == other; });
      if (it == latest.end()) {
        latest.emplace_back(std::move(other), l.other_at);
      } else {
        it->second = l.other_at;
      }
    }
  }
  for (const auto& [other, reach] : latest) {
    Status s = other->error_before(reach, depth + 1);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace zdp::cuda
