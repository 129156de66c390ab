// Cutting the engine's timeline into steps and named parts (profile_data.h).
#include "profile/src/profile_data.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace zdp::profile {

const char* to_string(StepPart part) {
  switch (part) {
    case StepPart::kData: return "data";
    case StepPart::kForward: return "forward";
    case StepPart::kBackward: return "backward";
    case StepPart::kReduceWait: return "reduce wait";
    case StepPart::kNorm: return "norm";
    case StepPart::kOptimizer: return "optimizer";
    case StepPart::kGatherWait: return "gather wait";
    case StepPart::kPostStep: return "post-step";
    case StepPart::kOther: return "other";
  }
  return "?";
}

double busbw_factor(CollectiveOp op, int world_size) {
  if (world_size <= 1) return 0.0;
  const double n = world_size;
  return op == CollectiveOp::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

const char* collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all-reduce";
    case CollectiveOp::kReduceScatter: return "reduce-scatter";
    case CollectiveOp::kAllGather: return "all-gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kBarrier: return "barrier";
    case CollectiveOp::kAllToAll: return "all-to-all";
  }
  return "?";
}

std::string collective_label(CollectiveOp op, bool reduction) {
  return std::string(collective_name(op)) + (reduction && op == CollectiveOp::kAllGather ? " (grads)" : "");
}

double CollectiveTiming::busbw(int world_size) const {
  const double t = seconds();
  return t > 0 ? static_cast<double>(bytes) / t * busbw_factor(op, world_size) : 0.0;
}

double StepProfile::exposed_comm() const {
  double blocking = 0;
  for (const CollectiveTiming& c : collectives) {
    if (c.bucket < 0) blocking += c.seconds();
  }
  return part(StepPart::kReduceWait) + part(StepPart::kGatherWait) + blocking;
}

double StepProfile::comm() const {
  double total = 0;
  for (const CollectiveTiming& c : collectives) total += c.seconds();
  return total;
}

namespace {

using Kind = TimelineEvent::Kind;

bool is_collective(Kind k) {
  return k == Kind::kReduceStart || k == Kind::kReduceEnd || k == Kind::kGatherStart || k == Kind::kGatherEnd;
}

// Walks one step's compute points: each point closes the span since the previous one,
// labelled with the phase it ends, and opens the next phase.
void cut_compute(const std::vector<TimelineEvent>& points, StepProfile& s) {
  StepPart phase = StepPart::kData;
  StepPart before_wait = StepPart::kData;
  bool after_micro = false;  // between a micro-batch's end and the next point
  double cursor = s.begin;
  auto close = [&](StepPart part, double t) {
    if (t > cursor) s.spans.push_back(Span{part, cursor, t});
    cursor = std::max(cursor, t);
  };
  for (const TimelineEvent& e : points) {
    const double t = e.seconds;
    switch (e.kind) {
      case Kind::kForward: close(phase, t); phase = StepPart::kForward; break;
      case Kind::kBackward: close(phase, t); phase = StepPart::kBackward; break;
      case Kind::kMicroEnd: close(phase, t); phase = StepPart::kData; break;
      case Kind::kStepBegin: close(after_micro ? StepPart::kOther : phase, t); phase = StepPart::kReduceWait; break;
      case Kind::kReductionsDone: close(phase, t); phase = StepPart::kNorm; break;
      case Kind::kNormDone: close(phase, t); phase = StepPart::kOptimizer; break;
      case Kind::kOptimizerDone: close(phase, t); phase = StepPart::kGatherWait; break;
      case Kind::kStepEnd: close(phase, t); phase = StepPart::kPostStep; break;
      case Kind::kCommWaitBegin:
        close(phase, t);
        before_wait = phase;
        phase = e.op == CollectiveOp::kAllGather ? StepPart::kGatherWait : StepPart::kReduceWait;
        break;
      case Kind::kCommWaitEnd: close(phase, t); phase = before_wait; break;
      case Kind::kIterationEnd: close(phase, t); break;
      default: break;
    }
    after_micro = e.kind == Kind::kMicroEnd;
  }
  double covered = 0;
  for (const Span& sp : s.spans) {
    s.parts[static_cast<size_t>(sp.part)] += sp.end - sp.begin;
    covered += sp.end - sp.begin;
  }
  s.parts[static_cast<size_t>(StepPart::kOther)] += std::max(0.0, s.seconds() - covered);
}

// Pairs each collective's start with the next end of the same bucket and kind: the comm
// stream runs one collective at a time, so they come in order.
void pair_collectives(const std::vector<TimelineEvent>& points, StepProfile& s) {
  const TimelineEvent* open = nullptr;
  for (const TimelineEvent& e : points) {
    if (e.kind == Kind::kReduceStart || e.kind == Kind::kGatherStart) {
      open = &e;
    } else if (open != nullptr && e.bucket == open->bucket &&
               (e.kind == Kind::kReduceEnd) == (open->kind == Kind::kReduceStart)) {
      s.collectives.push_back(
          CollectiveTiming{e.bucket, e.op, e.bytes, open->seconds, e.seconds, open->kind == Kind::kReduceStart});
      open = nullptr;
    }
  }
}

}  // namespace

std::vector<StepProfile> steps_from_timeline(const std::vector<TimelineEvent>& events) {
  struct Lanes {
    std::vector<TimelineEvent> compute, comm;
    const TimelineEvent* begin = nullptr;
    const TimelineEvent* end = nullptr;
  };
  std::map<int64_t, Lanes> by_step;
  for (const TimelineEvent& e : events) {
    Lanes& l = by_step[e.step];
    if (is_collective(e.kind)) {
      l.comm.push_back(e);
    } else if (e.kind == Kind::kIterationBegin) {
      l.begin = &e;
    } else {
      l.compute.push_back(e);
      if (e.kind == Kind::kIterationEnd) l.end = &e;
    }
  }
  std::vector<StepProfile> out;
  for (auto it = by_step.begin(); it != by_step.end(); ++it) {
    auto& [step, lanes] = *it;
    if (lanes.begin == nullptr || lanes.end == nullptr) continue;
    StepProfile s;
    s.step = step;
    s.begin = lanes.begin->seconds;
    s.end = lanes.end->seconds;
    // On CPU ranks the end is stamped when the compute stream's worker reaches it (after a
    // trainer's collective queued there), which can be after the host began the next
    // step: that tail ran under the next step, so this step ends where the next begins
    // (the trace's lane must nest: Perfetto drops overlapping slices; and the step time
    // summed over steps must not exceed the run).
    const auto next = std::next(it);
    if (next != by_step.end() && next->first == step + 1 && next->second.begin != nullptr &&
        next->second.begin->seconds < s.end) {
      s.end = std::max(s.begin, next->second.begin->seconds);
      for (TimelineEvent& e : lanes.compute) e.seconds = std::min(e.seconds, s.end);
    }
    // Compute points are recorded in order; the sort only guards against equal stamps
    // arriving through two CUDA callbacks in a different order (stable keeps the rest).
    std::stable_sort(lanes.compute.begin(), lanes.compute.end(),
                     [](const TimelineEvent& a, const TimelineEvent& b) { return a.seconds < b.seconds; });
    cut_compute(lanes.compute, s);
    pair_collectives(lanes.comm, s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace zdp::profile
