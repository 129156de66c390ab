// The profiler's measurements of one rank: the engine's timeline cut into steps, each
// step into named parts that cover it (StepPart), plus the step's collectives and memory.
// Pure data and arithmetic (no device, no communication), unit-tested on synthetic
// timelines (tests/unit/profile_data_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "zdp/device.h"
#include "zdp/engine.h"
#include "zdp/profiler.h"

namespace zdp::profile {

// Where a rank's compute lane spends a step, between consecutive timeline points:
//   data         iteration begin or micro-batch end -> forward (loading the batch)
//   forward      kForward -> kBackward, less the communication waits inside it
//   backward     kBackward -> kMicroEnd, less the communication waits inside it
//   reduce wait  step() begin -> every reduction arrived, plus backward's waits for a
//                gradient staging buffer still being reduced: exposed reduction time
//   norm         -> the step decided (per-bucket statistics, their all-reduce, the
//                collective of bucket -1, and the decision, all on the device)
//   optimizer    -> the fused optimizer over the owned slices (stages 1-2: gathers issued)
//   gather wait  -> step() returns (waiting for all-gathers), plus every wait for a
//                layer group's or view's all-gather outside step(): exposed gather time
//   post-step    step() return -> iteration end (dp-train, deterministic: the losses' all-gather)
//   other        what no point delimits (the last micro-batch end -> step())
enum class StepPart : int { kData = 0, kForward, kBackward, kReduceWait, kNorm, kOptimizer, kGatherWait, kPostStep, kOther };
inline constexpr int kNumStepParts = 9;
const char* to_string(StepPart part);

struct Span {
  StepPart part = StepPart::kOther;
  double begin = 0, end = 0;  // steady_clock seconds
};

struct CollectiveTiming {
  int bucket = -1;
  CollectiveOp op = CollectiveOp::kAllReduce;
  int64_t bytes = 0;
  double begin = 0, end = 0;
  // The gradient side (kReduceStart/End): a reduction, or deterministic mode's gradient
  // all-gather; false for parameter gathers (kGatherStart/End), which share its op.
  bool reduction = false;
  double seconds() const { return end - begin; }
  // nccl-tests' bus bandwidth in bytes/s: bytes / time x 2(n-1)/n (all-reduce) or (n-1)/n.
  double busbw(int world_size) const;
};

// nccl-tests' bus bandwidth factor of `op` on `world_size` ranks (0 for one rank).
double busbw_factor(CollectiveOp op, int world_size);
// "all-reduce", "reduce-scatter", "all-gather".
const char* collective_name(CollectiveOp op);
// collective_name, telling deterministic mode's gradient all-gather ("all-gather (grads)")
// from the parameters' all-gather of the same bucket.
std::string collective_label(CollectiveOp op, bool reduction);

struct StepProfile {
  int64_t step = 0;                       // the iteration (Engine step() calls before it)
  double begin = 0, end = 0;              // kIterationBegin, kIterationEnd
  std::array<double, kNumStepParts> parts{};  // seconds; they sum to end - begin
  std::vector<Span> spans;                // the compute lane, in time order
  std::vector<CollectiveTiming> collectives;  // the comm lane, in stream order
  std::array<MemoryCounters, kNumMemCategories> memory{};  // current at the end, peak within the step
  MemoryCounters memory_total;  // the same for the sum of the categories

  double seconds() const { return end - begin; }
  double part(StepPart p) const { return parts[static_cast<size_t>(p)]; }
  double compute() const { return part(StepPart::kForward) + part(StepPart::kBackward); }
  // Reduce wait + gather wait + the blocking collectives (bucket < 0: the norm's all-reduce).
  double exposed_comm() const;
  double comm() const;  // the collectives' time on the comm stream
};

struct RankProfile {
  int rank = 0;
  std::string host;
  std::vector<StepProfile> steps;
};

// The steps of `events` (any order of steps; each lane's events in the order recorded)
// that have both a kIterationBegin and a kIterationEnd, ascending. Spans cover each step
// from begin to end; "other" gets what no point delimits.
std::vector<StepProfile> steps_from_timeline(const std::vector<TimelineEvent>& events);

}  // namespace zdp::profile
