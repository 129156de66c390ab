// Profiling runs ([profile] in the config): every rank turns the engine's timeline
// (EngineOptions::trace, Engine::mark) into a per-step breakdown, per-bucket collective
// timings and memory by category; at the end rank 0 collects every rank's numbers through
// the job's store and writes
//   <dir>/profile.jsonl  one JSON line per step per rank, then one summary line
//   <dir>/trace.json     Chrome trace / Perfetto: per rank a "compute" and a "comm" lane
//   <dir>/memory.svg     bytes per rank by category for stages 0-3
// and prints the summary: the step time breakdown, communication hidden by overlap,
// throughput and MFU, memory measured vs planned, the collectives, the straggler report.
//
// Use (every rank; dp-train's loop is the worked example):
//   engine.finalize();                            // with EngineOptions::trace on
//   Profiler profiler(ctx, engine, options);
//   for each step: engine.mark(kIterationBegin); profiler.begin_step(); per micro-batch {load; mark(kForward);
//     forward; mark(kBackward); backward; mark(kMicroEnd)}; engine.step(); ...;
//     engine.mark(kIterationEnd); profiler.end_step();
//   profiler.finish();                            // collective: every rank calls it
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zdp/context.h"
#include "zdp/device.h"
#include "zdp/engine.h"
#include "zdp/status.h"

namespace zdp {

// Bytes per rank by device-accounting category (MemCategory order).
using MemoryByCategory = std::array<int64_t, kNumMemCategories>;

struct ProfileOptions {
  std::string dir;                // rank 0 writes its files here (created if missing); required
  int64_t warmup_steps = 2;       // first steps left out of the summary
  int64_t active_steps = 0;       // steps measured after the warm-up; 0 = all the rest
  bool trace = true;              // write trace.json
  int64_t samples_per_step = 0;   // the global batch (samples/s)
  int64_t tokens_per_sample = 1;  // tokens/s = samples/s x this
  double flops_per_sample = 0;    // forward + backward, for MFU
  double peak_flops = 0;          // one rank's peak FLOP/s; 0 = MFU not reported
  std::string description;        // the run, for the summary's first line ("gpt 3 x 96 ...")
  std::FILE* out = stdout;        // rank 0's summary; nullptr = none
  int64_t first_step = 0;         // the trainer's number of its first step (a resumed run's
                                  // start); the warm-up counts from there
  // The most timeline points all ranks keep together (each rank its 1/K share): past it a
  // rank drops its oldest measured steps whole (the newest always stays), so a run
  // measured over all its steps stays bounded in memory and in what rank 0 gathers and
  // writes (about 20 MiB at the default, whatever the world size).
  int64_t max_kept_points = 300000;
  // The planned bytes per rank at `stage` (what `dp-launch plan` prints): the summary's
  // "planned" column (this run's stage) and the model bars of memory.svg (every stage).
  // Unset: the engine's own plan (Engine::memory()'s "planned" column: plan_memory() without
  // the model's activations) for this run's stage only.
  std::function<StatusOr<MemoryByCategory>(int stage)> plan;
  std::string plan_source = "the plan";  // what `plan` is, for the summary ("dp-launch plan")
  // ProfileOptions of config.profile: dir (launch.log_dir when empty), warm-up, active
  // steps, trace, and peak_tflops (0 leaves peak_flops to the caller).
  static ProfileOptions from(const Config& config);
};

// What finish() returns on rank 0 (other ranks get steps = 0). Means over the measured
// steps and the ranks.
struct ProfileSummary {
  int64_t steps = 0;              // measured steps
  double step_seconds = 0;        // mean step time
  double named_seconds = 0;       // the sum of the named components (all but "other")
  double hidden_fraction = 0;     // communication hidden by overlap: 1 - exposed / total
  double samples_per_second = 0;
  double tokens_per_second = 0;
  double mfu = -1;                // < 0: not reported
  int slowest_rank = -1;          // the largest forward + backward time
  double slowest_vs_median = 0;   // its excess over the other ranks' median, as a fraction
  std::string trace_path, svg_path, jsonl_path;
};

class Profiler {
 public:
  // REQUIRES: ctx and engine outlive this. Throws zdp::Error (kInvalidArgument) when the
  // engine is not finalized, its EngineOptions::trace is off or options.dir is empty.
  Profiler(Context& ctx, Engine& engine, ProfileOptions options);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // At each iteration's start (after its kIterationBegin mark): the step's memory peak
  // starts here, so what runs between steps (an evaluation, a checkpoint save) is not
  // counted in the next step's peak. Optional: without it the peak runs from end_step().
  void begin_step();
  // After each iteration's kIterationEnd mark: takes the engine's timeline so far and this
  // step's memory counters (current, and the peak since begin_step(), or the last call).
  void end_step();
  // Collective: every rank sends its measurements to rank 0 through the store; rank 0
  // writes the files and prints the summary (or, when no step was measured, says so and
  // writes nothing). Errors name the rank and the file or key.
  StatusOr<ProfileSummary> finish();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "profile.jsonl, trace.json": the profiler's files (and dp-train's kernels.json) that
// exist in `dir`, comma-separated; "" when none. A run that writes none of its own there
// (profiling off, or no step measured) says that these are an earlier run's.
std::string existing_profile_files(const std::string& dir);

}  // namespace zdp
