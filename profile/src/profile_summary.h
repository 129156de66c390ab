// The end-of-run summary of a profiling run, from every rank's measured steps: the step
// time by part, communication hidden by overlap, throughput and MFU, memory measured vs
// planned, the collectives per bucket, and the straggler report. Pure arithmetic and
// formatting; the Profiler feeds it and writes it out.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "profile/src/profile_data.h"

namespace zdp::profile {

struct SummaryInputs {
  int world_size = 1;
  int stage = 0;
  std::string description;        // the run, e.g. "gpt 3 x 96 (366k parameters), fp32"
  std::string device;             // rank 0's device name
  int64_t warmup_steps = 0;
  int64_t steps_run = -1;         // the steps this process ran (a resumed run: those left); < 0 unknown
  int64_t samples_per_step = 0;
  int64_t tokens_per_sample = 1;
  double flops_per_sample = 0;
  double peak_flops = 0;          // one rank's; 0 = no MFU
  std::array<int64_t, kNumMemCategories> planned{};  // bytes per rank; < 0 = not planned
  std::string plan_source = "the plan";             // where `planned` comes from, for the table
};

struct MemoryRow {
  std::string category;
  int64_t planned = -1;  // < 0: not planned
  int64_t measured = 0;  // current at the last measured step, largest over ranks
  int64_t peak = 0;      // highest within any measured step, largest over ranks
};

struct BucketRow {
  int bucket = -1;
  CollectiveOp op = CollectiveOp::kAllReduce;
  int64_t bytes = 0;
  bool reduction = false;  // the gradient side (CollectiveTiming::reduction)
  int64_t count = 0;      // over steps and ranks
  double seconds = 0;     // mean
  double busbw = 0;       // bytes/s, from the mean time
};

struct RankRow {
  int rank = 0;
  std::string host;
  double compute = 0;     // forward + backward, mean seconds per step
  double step = 0;
  double exposed = 0;
};

struct Summary {
  SummaryInputs in;
  int64_t steps = 0;                      // measured steps per rank
  int64_t first_step = 0, last_step = 0;  // 1-based, as the console counts them
  std::array<double, kNumStepParts> parts{};  // mean seconds per step over ranks and steps
  double step_seconds = 0;
  double comm_seconds = 0, exposed_seconds = 0;  // mean per step
  double hidden_fraction = -1;                   // < 0: no communication measured
  double samples_per_second = 0, tokens_per_second = 0;
  double mfu = -1;
  std::vector<MemoryRow> memory;           // the categories, then "total" (planned categories)
  std::vector<BucketRow> buckets;
  double sent_bytes_per_step = 0;          // bytes one rank sends per step, mean over ranks
  double sent_grad_bytes_per_step = 0;     // of them, the gradients' (reductions, deterministic mode's gradient
                                           // all-gathers; not the parameter gathers, not the norm)
  std::vector<RankRow> ranks;
  int slowest_rank = -1;
  double median_compute = 0;               // of the ranks but the slowest (all of one rank)
  double slowest_excess = 0;               // (slowest - median_compute) / median_compute

  double named_seconds() const;            // every part but "other"
};

// kInvalidArgument when no rank measured a step.
StatusOr<Summary> summarize(const std::vector<RankProfile>& ranks, const SummaryInputs& inputs);

struct OutputPaths {
  std::string trace, svg, jsonl;  // empty: not written
};
// The console tables (rank 0 prints them).
std::string format_summary(const Summary& s, const OutputPaths& paths);
// The summary line of profile.jsonl ({"type":"summary", ...}, milliseconds and bytes).
nlohmann::json summary_line(const Summary& s, const OutputPaths& paths);

}  // namespace zdp::profile
