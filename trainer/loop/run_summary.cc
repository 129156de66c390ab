// train_summary.json: what dp-train measured, for tools to read (run_summary.h).
#include "trainer/loop/run_summary.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/internal/output_file.h"

namespace zdp::trainer {

std::vector<double> timed_steps(const std::vector<double>& step_seconds) {
  if (step_seconds.size() <= kWarmupSteps) return step_seconds;
  return std::vector<double>(step_seconds.begin() + static_cast<std::ptrdiff_t>(kWarmupSteps), step_seconds.end());
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

nlohmann::json run_summary(const Config& config, int world_size, const std::string& device,
                           const TrainSummary& run) {
  const TrainConfig& t = config.train;
  const std::vector<double> timed = timed_steps(run.step_seconds);
  const double step_s = median(timed);
  const int64_t tokens_per_step = t.global_batch * run.tokens_per_sample;
  nlohmann::json j;
  j["world_size"] = world_size;
  j["stage"] = config.zero.stage;
  j["model"] = to_string(config.model.kind);
  j["dtype"] = to_string(config.model.dtype);
  j["device"] = device;
  j["params"] = run.params;
  j["steps"] = run.losses.size();
  j["global_batch"] = t.global_batch;
  j["micro_batch"] = t.micro_batch;
  j["accum_steps"] = resolved_accum_steps(t, world_size);
  j["tokens_per_sample"] = run.tokens_per_sample;
  j["tokens_per_step"] = tokens_per_step;
  j["seconds"] = run.seconds;
  j["step_time_s_median"] = step_s;
  j["timed_steps"] = timed.size();
  j["tokens_per_s"] = step_s > 0 ? static_cast<double>(tokens_per_step) / step_s : 0.0;
  j["samples_per_s"] = step_s > 0 ? static_cast<double>(t.global_batch) / step_s : 0.0;
  j["peak_lr"] = run.peak_lr;
  j["final_loss"] = run.losses.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.losses.back());
  // Every step's, in full precision (the GPU check compares them), up to the last
  // kMaxSummaryLosses: a 40,000-step run wrote more than the 1 MiB that dp-launch scale
  // reads; loss_history keeps the whole run's curve, bounded.
  const size_t skip = run.losses.size() > kMaxSummaryLosses ? run.losses.size() - kMaxSummaryLosses : 0;
  j["losses"] = std::vector<double>(run.losses.begin() + static_cast<std::ptrdiff_t>(skip), run.losses.end());
  j["losses_first_step"] = run.first_step + static_cast<int64_t>(skip) + 1;  // of losses[0], counted from 1
  j["eval_loss"] = run.evals.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.evals.back().second);
  j["eval_step"] = run.evals.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.evals.back().first);
  j["first_step"] = run.first_step;
  j["resumed_from"] = run.resumed_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.resumed_from);
  j["loss_history"] = run.history.to_json();
  j["param_sha256"] = run.param_sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.param_sha256);
  j["arithmetic_libraries"] =
      run.arithmetic_libraries.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.arithmetic_libraries);
  // Steps skipped for a non-finite gradient, from step 1 (a resumed run's earlier ones
  // too): the console names only the logged steps' (the GPU check requires 0).
  const int64_t trainer_steps = run.first_step + static_cast<int64_t>(run.losses.size());
  j["optimizer_steps"] = run.optimizer_steps < 0 ? nlohmann::json(nullptr) : nlohmann::json(run.optimizer_steps);
  j["skipped_steps"] =
      run.optimizer_steps < 0 ? nlohmann::json(nullptr) : nlohmann::json(trainer_steps - run.optimizer_steps);
  return j;
}

std::string run_summary_path(const Config& config) {
  return (std::filesystem::path(config.launch.log_dir) / "train_summary.json").string();
}

Status write_run_summary(const std::string& path, const nlohmann::json& summary) {
  // Paths may hold bytes that are not UTF-8: replaced (U+FFFD) instead of a throw.
  return write_text_file(path, summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Status write_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return Status(StatusCode::kIoError, "'" + path + "': cannot create its directory: " + ec.message());
  return write_file_atomically(path, text, "file");
}

}  // namespace zdp::trainer
