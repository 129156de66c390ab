// Timeline: points of the engine's streams, as the profiler reads them.
#include "engine/src/timeline.h"

#include <chrono>

namespace zdp {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Timeline::add(TimelineEvent event) {
  event.seconds = steady_seconds();
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(event);
}

void Timeline::collective(TimelineEvent::Kind kind, int bucket, CollectiveOp op, int64_t bytes) {
  if (!enabled_ || exec_ == nullptr) return;
  const TimelineEvent e{kind, bucket, iteration_, 0.0, op, bytes};
  // A failure to enqueue only loses a trace point; the collective's own enqueue reports it.
  (void)exec_->comm().enqueue_host("trace", [this, e] {
    add(e);
    return Status::Ok();
  });
}

void Timeline::compute(TimelineEvent::Kind kind, int bucket, CollectiveOp op) {
  if (!enabled_ || exec_ == nullptr) return;
  const TimelineEvent e{kind, bucket, kind == TimelineEvent::Kind::kIterationEnd ? iteration_ - 1 : iteration_, 0.0,
                        op};
  if (!exec_->cuda()) {
    add(e);
    return;
  }
  (void)exec_->compute().enqueue_host("trace", [this, e] {
    add(e);
    return Status::Ok();
  });
}

std::vector<TimelineEvent> Timeline::copy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<TimelineEvent> Timeline::take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TimelineEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace zdp
