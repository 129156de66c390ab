// Checkpointer: choosing, loading and saving dp-train's checkpoints (the engine does the
// tensors; this file the decisions, the trainer's state and the console lines).
#include "trainer/loop/checkpointing.h"

#include <chrono>
#include <cstdio>

namespace zdp::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// The value of `key` in the trainer JSON of a checkpoint, or null when absent (a
// checkpoint written by another trainer stores what it likes).
nlohmann::json field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j.at(key) : nlohmann::json();
}

constexpr char kChoiceError[] = "error:";

}  // namespace

nlohmann::json trainer_state(const Config& config, int64_t dataset_size) {
  nlohmann::json j;
  j["program"] = "dp-train";
  j["seed"] = config.train.seed;
  j["global_batch"] = config.train.global_batch;
  j["dataset_samples"] = dataset_size;
  j["shuffle"] = config.data.shuffle;
  j["steps"] = config.train.steps;
  j["config"] = to_toml(config);
  return j;
}

std::vector<std::string> resume_notes(const CheckpointState& saved, const Config& config, int world_size,
                                      int64_t dataset_size) {
  std::vector<std::string> notes;
  if (saved.world_size != world_size || saved.stage != config.zero.stage) {
    notes.push_back("saved by " + std::to_string(saved.world_size) + " rank(s) at ZeRO stage " +
                    std::to_string(saved.stage) + ", loaded by " + std::to_string(world_size) +
                    " rank(s) at stage " + std::to_string(config.zero.stage) + " (re-sharded)");
  }
  if (saved.compute_dtype != to_string(config.model.dtype)) {
    notes.push_back("compute dtype " + saved.compute_dtype + " at save, " + to_string(config.model.dtype) +
                    " now (the fp32 masters carry over)");
  }
  nlohmann::json trainer = nlohmann::json::object();
  if (!saved.trainer_json.empty()) trainer = nlohmann::json::parse(saved.trainer_json, nullptr, false);
  const nlohmann::json batch = field(trainer, "global_batch");
  if (batch.is_number_integer() && batch.get<int64_t>() != config.train.global_batch) {
    notes.push_back("train.global_batch " + std::to_string(batch.get<int64_t>()) + " at save, " +
                    std::to_string(config.train.global_batch) + " now: the data continues at sample " +
                    std::to_string(saved.data_position) + " with the new batch");
  }
  const nlohmann::json samples = field(trainer, "dataset_samples");
  const nlohmann::json shuffle = field(trainer, "shuffle");
  const nlohmann::json seed = field(trainer, "seed");
  if ((samples.is_number_integer() && samples.get<int64_t>() != dataset_size) ||
      (shuffle.is_boolean() && shuffle.get<bool>() != config.data.shuffle) ||
      (seed.is_number_integer() && seed.get<int64_t>() != config.train.seed)) {
    notes.push_back("the data order differs from the saved run's (training set " + samples.dump() + " -> " +
                    std::to_string(dataset_size) + " samples, shuffle " + shuffle.dump() + " -> " +
                    (config.data.shuffle ? "true" : "false") + ", train.seed " + seed.dump() + " -> " +
                    std::to_string(config.train.seed) + "): sample " + std::to_string(saved.data_position) +
                    " of the new order is not where the saved run stopped");
  }
  return notes;
}

bool checkpoint_due(const Config& config, int64_t done) {
  const CheckpointConfig& c = config.checkpoint;
  if (c.dir.empty()) return false;
  return done == config.train.steps || (c.every_steps > 0 && done % c.every_steps == 0);
}

Checkpointer::Checkpointer(Context& ctx, Engine& engine, const Config& config, Console& console,
                           int64_t dataset_size)
    : ctx_(ctx), engine_(engine), config_(config), console_(console), dataset_size_(dataset_size) {}

StatusOr<std::string> Checkpointer::choose() {
  const CheckpointConfig& c = config_.checkpoint;
  switch (c.resume) {
    case ResumeMode::kNever: return std::string();
    case ResumeMode::kPath: {
      StatusOr<std::string> path = resolve_checkpoint(c.resume_path);
      if (!path.ok()) {
        return Status(path.status().code(), config_.where("checkpoint.resume") + ": checkpoint.resume = \"" +
                                                c.resume_path + "\": " + path.status().message());
      }
      return path;
    }
    case ResumeMode::kAuto: {
      if (c.dir.empty()) return std::string();
      StatusOr<std::string> latest = find_latest_checkpoint(c.dir);
      if (latest.ok()) return latest;
      if (latest.status().code() == StatusCode::kNotFound) return std::string();  // a fresh run
      return Status(latest.status().code(), config_.where("checkpoint.dir") + ": looking for a checkpoint to resume "
                                                "in checkpoint.dir = \"" + c.dir + "\": " + latest.status().message());
    }
  }
  return std::string();
}

StatusOr<ResumePoint> Checkpointer::resume() {
  // Rank 0 decides and publishes under a key numbered by the call (the store counts every
  // rank's arrival; calls are separated by the collective load, so their numbers differ).
  const int K = ctx_.world_size();
  ZDP_ASSIGN_OR_RETURN(const int64_t arrival, ctx_.store().add("dp-train/resume/arrivals", 1));
  const std::string key = "dp-train/resume/" + std::to_string((arrival - 1) / K);
  std::string chosen;
  if (ctx_.rank() == 0) {
    StatusOr<std::string> path = choose();
    ZDP_RETURN_IF_ERROR(ctx_.store().set(key, path.ok() ? *path : kChoiceError + path.status().to_string()));
    if (!path.ok()) return path.status();
    chosen = *path;
  } else {
    ZDP_ASSIGN_OR_RETURN(chosen, ctx_.store().get(key, ctx_.collective_timeout()));
    if (chosen.rfind(kChoiceError, 0) == 0) {
      return Status(StatusCode::kAborted,
                    "rank 0 could not choose the checkpoint to resume: " + chosen.substr(sizeof(kChoiceError) - 1));
    }
  }
  ResumePoint point;
  if (chosen.empty()) {
    if (config_.checkpoint.resume == ResumeMode::kAuto && !config_.checkpoint.dir.empty()) {
      console_.line("checkpoint: none in " + config_.checkpoint.dir + ": starting from step 0");
    }
    return point;
  }
  const auto start = Clock::now();
  StatusOr<CheckpointState> loaded = engine_.load_checkpoint(chosen);
  if (!loaded.ok()) {
    const CheckpointConfig& c = config_.checkpoint;
    const std::string setting = c.resume == ResumeMode::kPath
                                    ? "checkpoint.resume = \"" + c.resume_path + "\""
                                    : "checkpoint.resume = \"auto\" (the newest in " + c.dir + ": " + chosen + ")";
    return Status(loaded.status().code(),
                  config_.where("checkpoint.resume") + ": " + setting + ": " + loaded.status().message());
  }
  point.step = loaded->step;
  point.data_position = loaded->data_position;
  point.path = loaded->path.empty() ? chosen : loaded->path;
  console_.line("checkpoint: resumed from " + point.path + " in " + fixed(seconds_since(start), 2) +
                " s: continuing at step " + std::to_string(point.step) + " with sample " +
                std::to_string(point.data_position) + " (optimizer step " + std::to_string(loaded->optimizer_steps) +
                " for the LR schedule)");
  for (const std::string& note : resume_notes(*loaded, config_, K, dataset_size_)) {
    console_.line("checkpoint: note: " + note);
  }
  return point;
}

Status Checkpointer::save(int64_t step, int64_t data_position) {
  CheckpointState state;
  state.step = step;
  state.data_position = data_position;
  state.trainer_json = trainer_state(config_, dataset_size_).dump();
  SaveOptions options;
  options.keep = config_.checkpoint.keep_last;
  options.storage = config_.checkpoint.storage;
  // The engine logs (rank 0) where it saved, how many bytes and how long it took.
  StatusOr<std::string> path = engine_.save_checkpoint(config_.checkpoint.dir, state, options);
  if (!path.ok()) {
    return Status(path.status().code(), "saving the checkpoint of step " + std::to_string(step) + " under " +
                                            config_.checkpoint.dir + ": " + path.status().message());
  }
  return Status::Ok();
}

}  // namespace zdp::trainer
