// FlightRecorder: a ring of CollectiveRecords indexed by sequence number.
#include "runtime/src/comm/flight_recorder.h"

#include <algorithm>

namespace zdp::detail {
namespace {

// splitmix64's finaliser: a cheap, well-mixing 64-bit hash step.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t fingerprint_term(const CollectiveDesc& desc) { return mix(desc.signature() ^ mix(desc.seq)); }

FlightRecorder::FlightRecorder(size_t capacity) : ring_(std::max<size_t>(capacity, 1)), last_end_(Clock::now()) {}

uint64_t FlightRecorder::enqueue(CollectiveDesc& desc) {
  std::lock_guard<std::mutex> lock(mu_);
  desc.seq = issued_++;
  CollectiveRecord& r = ring_[desc.seq % ring_.size()];
  r = CollectiveRecord{};
  r.desc = desc;
  r.enqueued = Clock::now();
  unfinished_[desc.seq] = Unfinished{desc, r.enqueued};
  // A sum of terms: order-independent as a sum, yet each term carries its number, so
  // a test hook may amend a term later and swapped collectives still change it.
  fingerprint_ += fingerprint_term(desc);
  return desc.seq;
}

void FlightRecorder::amend(uint64_t seq, const CollectiveDesc& desc) {
  std::lock_guard<std::mutex> lock(mu_);
  CollectiveRecord* r = find(seq);
  if (r == nullptr) return;
  fingerprint_ -= fingerprint_term(r->desc);
  fingerprint_ += fingerprint_term(desc);
  r->desc = desc;
  auto it = unfinished_.find(seq);
  if (it != unfinished_.end()) it->second.desc = desc;
}

CollectiveRecord* FlightRecorder::find(uint64_t seq) {
  CollectiveRecord& r = ring_[seq % ring_.size()];
  return r.desc.seq == seq && r.enqueued != Clock::time_point() ? &r : nullptr;
}

void FlightRecorder::started(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (CollectiveRecord* r = find(seq)) r->started = Clock::now();
}

void FlightRecorder::finished(uint64_t seq, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = unfinished_.find(seq);
  if (it == unfinished_.end() || it->second.failed) return;  // ended already, or stays as failed
  unfinished_.erase(it);
  last_end_ = Clock::now();
  ++completed_;
  if (CollectiveRecord* r = find(seq)) {
    r->ended = last_end_;
    r->failed = !ok;
  }
}

void FlightRecorder::failed(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = unfinished_.find(seq);
  if (it == unfinished_.end() || it->second.failed) return;
  it->second.failed = true;
  if (CollectiveRecord* r = find(seq)) {
    r->ended = Clock::now();
    r->failed = true;
  }
}

std::vector<CollectiveRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CollectiveRecord> out;
  const uint64_t first = issued_ > ring_.size() ? issued_ - ring_.size() : 0;
  for (uint64_t s = first; s < issued_; ++s) out.push_back(ring_[s % ring_.size()]);
  return out;
}

CommProgress FlightRecorder::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  CommProgress p;
  p.issued = issued_;
  p.completed = completed_;
  p.idle_s = std::chrono::duration<double>(now - last_end_).count();
  p.fingerprint = fingerprint_;
  if (!unfinished_.empty()) {
    const Unfinished& oldest = unfinished_.begin()->second;
    p.in_flight = true;
    p.current = oldest.desc;
    p.current_s = std::chrono::duration<double>(now - oldest.enqueued).count();
  }
  return p;
}

}  // namespace zdp::detail
