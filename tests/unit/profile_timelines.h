// Synthetic profiler timelines for the profile unit tests (profile_data_test,
// profile_summary_test, chrome_trace_test, profile_json_test): one stage-3 step of two
// micro-batches as the engine records it, and two ranks of three such steps.
#pragma once

#include <cstdint>
#include <vector>

#include "profile/src/profile_data.h"

namespace zdp::profile::timelines {

using Kind = TimelineEvent::Kind;

inline TimelineEvent at(Kind kind, double t, int64_t step = 0) { return TimelineEvent{kind, -1, step, t}; }
inline TimelineEvent comm(Kind kind, double t, int bucket, CollectiveOp op, int64_t bytes, int64_t step = 0) {
  return TimelineEvent{kind, bucket, step, t, op, bytes};
}

// One step of two micro-batches with a gather wait inside the second forward, as an
// engine at stage 3 records it (times in seconds, offset by `t0`).
inline std::vector<TimelineEvent> one_step(double t0, int64_t step, double backward_extra = 0) {
  const double b = backward_extra;
  std::vector<TimelineEvent> e = {
      at(Kind::kIterationBegin, t0 + 0, step), at(Kind::kForward, t0 + 1, step), at(Kind::kBackward, t0 + 3, step),
      at(Kind::kMicroEnd, t0 + 6 + b, step),   at(Kind::kForward, t0 + 7 + b, step),
      comm(Kind::kCommWaitBegin, t0 + 8 + b, 0, CollectiveOp::kAllGather, 0, step),
      comm(Kind::kCommWaitEnd, t0 + 9 + b, 0, CollectiveOp::kAllGather, 0, step),
      at(Kind::kBackward, t0 + 10 + b, step),  at(Kind::kMicroEnd, t0 + 12 + b, step),
      at(Kind::kStepBegin, t0 + 12.5 + b, step), at(Kind::kReductionsDone, t0 + 14 + b, step),
      at(Kind::kNormDone, t0 + 15 + b, step),  at(Kind::kOptimizerDone, t0 + 17 + b, step),
      at(Kind::kStepEnd, t0 + 18 + b, step),   at(Kind::kIterationEnd, t0 + 19 + b, step),
  };
  // The comm lane, in stream order: bucket 1 reduced during the first backward, bucket 0
  // gathered for the second forward and reduced after the second backward, the norm's
  // all-reduce (bucket -1) inside step(), bucket 0 gathered after the optimizer.
  for (const TimelineEvent& c :
       {comm(Kind::kReduceStart, t0 + 4, 1, CollectiveOp::kReduceScatter, 4096, step),
        comm(Kind::kReduceEnd, t0 + 5, 1, CollectiveOp::kReduceScatter, 4096, step),
        comm(Kind::kGatherStart, t0 + 7.9 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kGatherEnd, t0 + 9 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kReduceStart, t0 + 11 + b, 0, CollectiveOp::kReduceScatter, 8192, step),
        comm(Kind::kReduceEnd, t0 + 13.5 + b, 0, CollectiveOp::kReduceScatter, 8192, step),
        comm(Kind::kReduceStart, t0 + 14.2 + b, -1, CollectiveOp::kAllReduce, 16, step),
        comm(Kind::kReduceEnd, t0 + 14.8 + b, -1, CollectiveOp::kAllReduce, 16, step),
        comm(Kind::kGatherStart, t0 + 16 + b, 0, CollectiveOp::kAllGather, 8192, step),
        comm(Kind::kGatherEnd, t0 + 18 + b, 0, CollectiveOp::kAllGather, 8192, step)}) {
    e.push_back(c);
  }
  return e;
}

inline std::vector<RankProfile> two_ranks(double rank1_backward_extra) {
  std::vector<RankProfile> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].host = "h";
    std::vector<TimelineEvent> events;
    for (int64_t step = 0; step < 3; ++step) {
      const std::vector<TimelineEvent> e = one_step(100.0 * static_cast<double>(step), step, r == 1 ? rank1_backward_extra : 0);
      events.insert(events.end(), e.begin(), e.end());
    }
    ranks[static_cast<size_t>(r)].steps = steps_from_timeline(events);
    for (StepProfile& s : ranks[static_cast<size_t>(r)].steps) {
      s.memory[static_cast<size_t>(MemCategory::kParams)] = {1000, 1000};
      s.memory[static_cast<size_t>(MemCategory::kOther)] = {500, 700 + 100 * r};
      s.memory_total = {1500, 1700 + 100 * r};
    }
  }
  return ranks;
}

}  // namespace zdp::profile::timelines
