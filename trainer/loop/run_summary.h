// The machine-readable end of a dp-train run: rank 0 writes <launch.log_dir>/train_summary.json
// so that tools (bench/dp_train_bench, `dp-launch scale`) read numbers instead of parsing
// console lines. The keys are a contract; add new ones, never rename or drop one:
//   world_size, stage, model, dtype, device, params, steps, global_batch, micro_batch,
//   accum_steps, tokens_per_sample, tokens_per_step, seconds, step_time_s_median,
//   timed_steps, tokens_per_s, samples_per_s, peak_lr, final_loss, eval_loss, eval_step,
//   first_step, resumed_from, loss_history, losses (every step's loss, this run's steps),
//   param_sha256 (train.deterministic: trainer/loop/param_hash.h's digest; else null),
//   optimizer_steps and skipped_steps (updates taken and steps skipped for a non-finite
//   gradient, from step 1; null when this run took no step), arithmetic_libraries
//   (train.deterministic: the GEMM libraries every rank computed with; else null)
// Rates use the median step time over the timed steps (all but the first
// kWarmupSteps when more than kWarmupSteps remain), so start-up and evaluation do not
// count; a step's time is the mean over the steps between two reads of the device's
// results (train.log_every), the host not waiting for the GPU in between; `seconds` is the whole loop, evaluations included. eval_loss/eval_step are the
// last held-out evaluation, null when none ran. A resumed run started at first_step (steps
// counts the steps this run took), from the checkpoint resumed_from (null: from scratch).
// loss_history is the curve loss.svg draws (LossHistory::to_json: from step 1, a resumed
// run's saved steps included; bounded).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/loop/train_loop.h"
#include "zdp/config.h"
#include "zdp/status.h"

namespace zdp::trainer {

inline constexpr size_t kWarmupSteps = 2;
// train_summary.json's "losses": the last this many steps' (with "losses_first_step").
inline constexpr size_t kMaxSummaryLosses = 16384;

// The steps whose times count: all but the first kWarmupSteps when more than that remain.
std::vector<double> timed_steps(const std::vector<double>& step_seconds);

// The median (the mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> values);

// The summary of `run` on `world_size` ranks of `config` (device: Device::name()).
nlohmann::json run_summary(const Config& config, int world_size, const std::string& device,
                           const TrainSummary& run);

// <launch.log_dir>/train_summary.json.
std::string run_summary_path(const Config& config);

// Writes `summary` to `path` through a temporary file and a rename, so a reader never sees
// half a file; creates the directory. kIoError naming the path on failure.
Status write_run_summary(const std::string& path, const nlohmann::json& summary);
// The same for any text (loss.svg).
Status write_text_file(const std::string& path, const std::string& text);

}  // namespace zdp::trainer
