// Timeline: points of the engine's streams, as the profiler reads them.
#include "engine/src/timeline.h"

namespace zdp {

Status Timeline::attach(Exec& exec) {
  if (!enabled_) return Status::Ok();
  StatusOr<std::unique_ptr<StreamClock>> clock = create_stream_clock(exec.device());
  if (!clock.ok()) return clock.status().with_context("timeline (EngineOptions::trace)");
  clock_ = std::move(*clock);
  exec_ = &exec;
  return Status::Ok();
}

void Timeline::mark(Stream& stream, const TimelineEvent& event, bool now) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  marked_.emplace(id, event);
  // A failure only loses the point; the stream's own work reports what went wrong.
  if (!clock_->mark(stream, id, now).ok()) marked_.erase(id);
}

void Timeline::collective(TimelineEvent::Kind kind, int bucket, CollectiveOp op, int64_t bytes) {
  if (!enabled_ || exec_ == nullptr) return;
  mark(exec_->comm(), TimelineEvent{kind, bucket, outside_ ? -1 : iteration_, 0.0, op, bytes}, /*now=*/false);
}

void Timeline::compute(TimelineEvent::Kind kind, int bucket, CollectiveOp op) {
  if (kind == TimelineEvent::Kind::kOutsideBegin || kind == TimelineEvent::Kind::kOutsideEnd) {
    outside_ = kind == TimelineEvent::Kind::kOutsideBegin;  // whether or not recording
    return;
  }
  if (!enabled_ || exec_ == nullptr) return;
  const int64_t step =
      outside_ ? -1 : (kind == TimelineEvent::Kind::kIterationEnd ? iteration_ - 1 : iteration_);
  const TimelineEvent e{kind, bucket, step, 0.0, op};
  // CPU: the compute stream's kernels run inline on this thread, so the host's time is
  // the stream's; but a trainer's collective on the compute stream (dp-train's loss
  // all-gather after step() in deterministic mode) runs on its worker, and the step ends
  // when that is done (the profile cuts a step at the next one's begin). Its
  // end is marked on the stream: read at once it left the all-reduce out of post-step,
  // and the next step's first reduction counted it as waiting for communication
  // (exposed > the collectives' time in most steps of a 2-rank mlp).
  const bool now = !exec_->cuda() && kind != TimelineEvent::Kind::kIterationEnd;
  mark(exec_->compute(), e, now);
}

void Timeline::collect_locked() {
  if (!clock_) return;
  for (const auto& [id, seconds] : clock_->take()) {
    const auto it = marked_.find(id);
    if (it == marked_.end()) continue;
    TimelineEvent e = it->second;
    e.seconds = seconds;
    events_.push_back(e);
    marked_.erase(it);
  }
}

std::vector<TimelineEvent> Timeline::copy() {
  std::lock_guard<std::mutex> lock(mu_);
  collect_locked();
  return events_;
}

std::vector<TimelineEvent> Timeline::take() {
  std::lock_guard<std::mutex> lock(mu_);
  collect_locked();
  std::vector<TimelineEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace zdp
