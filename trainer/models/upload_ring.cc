// UploadRing (upload_ring.h).
#include "trainer/models/upload_ring.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace zdp::trainer {
namespace {

constexpr int64_t kMinRingBytes = int64_t{8} << 20;
// A wait for a ring copy is a wait for the GPU to reach it; bounded like the engine's.
constexpr std::chrono::minutes kCopyTimeout{10};

}  // namespace

Status UploadRing::reserve(int64_t bytes) {
  const int64_t wanted = std::max(kMinRingBytes, 8 * bytes);
  if (!pinned_.empty() && pinned_.bytes() >= wanted) return Status::Ok();
  ZDP_RETURN_IF_ERROR(wait_for(0, pinned_.bytes()));
  StatusOr<DeviceBuffer> ring = device_.allocate(wanted, MemCategory::kOther, MemSpace::kPinnedHost);
  if (!ring.ok()) return ring.status().with_context("pinned upload ring");
  pinned_ = std::move(*ring);
  head_ = 0;
  return Status::Ok();
}

Status UploadRing::wait_for(int64_t begin, int64_t end) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->end <= begin || it->begin >= end) {
      ++it;
      continue;
    }
    if (!it->copied->ready()) {
      Status s = it->copied->wait(kCopyTimeout);
      if (!s.ok()) return s.with_context("upload ring: waiting for an earlier host -> device copy");
    }
    free_events_.push_back(std::move(it->copied));
    it = in_flight_.erase(it);
  }
  return Status::Ok();
}

Status UploadRing::upload(Stream& stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  const int64_t n = static_cast<int64_t>(bytes);
  if (pinned_.empty() || 8 * n > pinned_.bytes()) ZDP_RETURN_IF_ERROR(reserve(n));
  if (head_ + n > pinned_.bytes()) head_ = 0;  // wrap: the tail stays unused this round
  ZDP_RETURN_IF_ERROR(wait_for(head_, head_ + n));
  char* staged = pinned_.as<char>() + head_;
  std::memcpy(staged, src, bytes);
  ZDP_RETURN_IF_ERROR(stream.memcpy_async(dst, staged, bytes));
  std::unique_ptr<Event> copied;
  if (!free_events_.empty()) {
    copied = std::move(free_events_.back());
    free_events_.pop_back();
  } else {
    ZDP_ASSIGN_OR_RETURN(copied, device_.create_event());
  }
  ZDP_RETURN_IF_ERROR(stream.record(*copied));
  in_flight_.push_back(InFlight{head_, head_ + n, std::move(copied)});
  head_ += n;
  return Status::Ok();
}

}  // namespace zdp::trainer
