// Checkpointer: choosing, loading and saving dp-train's checkpoints (the engine does the
// tensors; this file the decisions, the trainer's state and the console lines).
#include "trainer/loop/checkpointing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/internal/parse_decimal.h"
#include "core/internal/printable.h"
#include "runtime/internal/checkpoint_dirs.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;
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

// " (epoch 2, position 17 of its 124)": where a data position falls in the stream of
// epochs (sampler.h). With data.shuffle the epoch's 17th sample is its permutation's,
// not the file's sample 17, so the message says the position, not a sample index.
std::string position_in_epoch(int64_t position, int64_t samples) {
  if (samples <= 0) return "";
  return " (epoch " + std::to_string(position / samples) + ", position " + std::to_string(position % samples) +
         " of its " + std::to_string(samples) + ")";
}

constexpr char kChoiceError[] = "error:";
// Rank 0's choice is a path to load as it is, not a step-<N> under each node's own dir.
constexpr char kChoicePath[] = "path:";

}  // namespace

// The samples one evaluation reads: min(eval_samples, the held-out set's), -1 without one.
int64_t evaluated_samples(const Config& config, const DataIdentity& held_out) {
  return held_out.samples < 0 ? -1 : std::min(config.train.eval_samples, held_out.samples);
}

nlohmann::json trainer_state(const Config& config, const DataIdentity& dataset, const LossHistory& history,
                             const DataIdentity& held_out) {
  nlohmann::json j;
  j["program"] = "dp-train";
  j["seed"] = config.train.seed;
  j["global_batch"] = config.train.global_batch;
  j["dataset_samples"] = dataset.samples;
  j["dataset_fingerprint"] = dataset.fingerprint;
  j["shuffle"] = config.data.shuffle;
  if (held_out.samples >= 0) {  // what the saved curve's held-out points measured
    j["held_out_samples"] = held_out.samples;
    j["held_out_fingerprint"] = held_out.fingerprint;
    j["evaluated_samples"] = evaluated_samples(config, held_out);
  }
  j["steps"] = config.train.steps;
  j["config"] = to_toml(config);
  j["history"] = history.to_json();
  return j;
}

std::vector<std::string> resume_notes(const CheckpointState& saved, const Config& config, int world_size,
                                      const DataIdentity& dataset, const DataIdentity& held_out) {
  const int64_t dataset_size = dataset.samples;
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
                    std::to_string(config.train.global_batch) + " now: the data continues at position " +
                    std::to_string(saved.data_position) + " with the new batch");
  }
  // A decaying schedule runs from warmup_steps to train.steps: another end stretches or
  // shrinks it, so the learning rate continues from the new schedule's value at the saved
  // optimizer step, not from the saved run's (raising train.steps to continue a finished
  // run raises the learning rate from its floor).
  const nlohmann::json steps = field(trainer, "steps");
  if (steps.is_number_integer() && steps.get<int64_t>() != config.train.steps &&
      config.optim.schedule != LrSchedule::kConstant) {
    notes.push_back("train.steps " + std::to_string(steps.get<int64_t>()) + " at save, " +
                    std::to_string(config.train.steps) + " now: the " + to_string(config.optim.schedule) +
                    " schedule now ends at step " + std::to_string(config.train.steps) +
                    ", so the learning rate continues from its value there, not from the saved run's");
  }
  const nlohmann::json samples = field(trainer, "dataset_samples");
  const nlohmann::json shuffle = field(trainer, "shuffle");
  const nlohmann::json seed = field(trainer, "seed");
  // The seed orders the samples when they are shuffled, and draws them when synthetic;
  // unshuffled token files read the same order whatever it is.
  const bool seed_matters = config.data.shuffle || config.data.kind == DataKind::kSynthetic;
  if ((samples.is_number_integer() && samples.get<int64_t>() != dataset_size) ||
      (shuffle.is_boolean() && shuffle.get<bool>() != config.data.shuffle) ||
      (seed_matters && seed.is_number_integer() && seed.get<int64_t>() != config.train.seed)) {
    notes.push_back("the data order differs from the saved run's (training set " + samples.dump() + " -> " +
                    std::to_string(dataset_size) + " samples, shuffle " + shuffle.dump() + " -> " +
                    (config.data.shuffle ? "true" : "false") + ", train.seed " + seed.dump() + " -> " +
                    std::to_string(config.train.seed) + "): sample " + std::to_string(saved.data_position) +
                    " of the new order is not where the saved run stopped");
  } else if (const nlohmann::json print = field(trainer, "dataset_fingerprint");
             print.is_string() && !print.get_ref<const std::string&>().empty() && !dataset.fingerprint.empty() &&
             print.get_ref<const std::string&>() != dataset.fingerprint) {
    // Same size, other contents: another corpus (or a rewritten one) under data.path.
    notes.push_back("the training data's contents differ from the saved run's (the same " +
                    std::to_string(dataset_size) + " samples, sampled digest " +
                    printable(print.get_ref<const std::string&>(), 80) + " -> " + printable(dataset.fingerprint, 80) +
                    "): the run continues at data position " + std::to_string(saved.data_position) + " of other data");
  }
  // The held-out curve continues only if it measures the same samples: another val file
  // or eval_samples joined two measurements into one line of loss.svg without a word.
  const nlohmann::json held_samples = field(trainer, "held_out_samples");
  const nlohmann::json held_print = field(trainer, "held_out_fingerprint");
  const nlohmann::json evaluated = field(trainer, "evaluated_samples");
  // A dp-train before the spread evaluation (no held-out fields) measured a token file's
  // first samples: its points and the new ones are not one curve either.
  const nlohmann::json saved_evals = field(field(trainer, "history"), "eval_step");
  if (held_out.samples >= 0 && held_samples.is_null() && config.data.kind == DataKind::kTokens &&
      field(trainer, "dataset_fingerprint").is_string() && saved_evals.is_array() && !saved_evals.empty()) {
    notes.push_back("the saved run's held-out points were measured on the held-out file's first samples (an earlier "
                    "dp-train); an evaluation now spreads its samples over the file: the held-out points before step " +
                    std::to_string(saved.step) + " and after it are not one curve");
  }
  if (held_out.samples >= 0 && held_samples.is_number_integer() && evaluated.is_number_integer() &&
      held_print.is_string() &&
      (held_samples.get<int64_t>() != held_out.samples || held_print.get_ref<const std::string&>() != held_out.fingerprint ||
       evaluated.get<int64_t>() != evaluated_samples(config, held_out))) {
    notes.push_back("the held-out loss now measures other samples than the saved run's (" + evaluated.dump() + " of " +
                    held_samples.dump() + " held-out samples, digest " +
                    printable(held_print.get_ref<const std::string&>(), 80) + " -> " +
                    std::to_string(evaluated_samples(config, held_out)) + " of " + std::to_string(held_out.samples) +
                    ", digest " + printable(held_out.fingerprint, 80) + "): the held-out points before step " +
                    std::to_string(saved.step) + " and after it are not one curve");
  }
  return notes;
}

StatusOr<LossHistory> saved_history(const std::string& trainer_json, int64_t step) {
  const nlohmann::json trainer = trainer_json.empty() ? nlohmann::json() : nlohmann::json::parse(trainer_json, nullptr, false);
  const nlohmann::json history = field(trainer, "history");
  if (history.is_null()) return LossHistory();
  StatusOr<LossHistory> h = LossHistory::from_json(history);
  if (h.ok() && h->last_step() > step) {
    return Status(StatusCode::kInvalidArgument, "loss history: it runs to step " + std::to_string(h->last_step()) +
                                                    ", past the checkpoint's step " + std::to_string(step));
  }
  return h;
}

bool checkpoint_due(const Config& config, int64_t done) {
  const CheckpointConfig& c = config.checkpoint;
  if (c.dir.empty()) return false;
  return done == config.train.steps || (c.every_steps > 0 && done % c.every_steps == 0);
}

Checkpointer::Checkpointer(Context& ctx, Engine& engine, const Config& config, Console& console,
                           DataIdentity dataset, DataIdentity held_out)
    : ctx_(ctx),
      engine_(engine),
      config_(config),
      console_(console),
      dataset_(std::move(dataset)),
      held_out_(std::move(held_out)) {}

bool Checkpointer::restarted() const {
  return ctx_.launch_env().attempt > 0 && !ctx_.launch_env().run_id.empty() && !config_.checkpoint.dir.empty();
}

bool Checkpointer::saved_by_this_run(const CheckpointState& saved) const {
  if (saved.trainer_json.empty()) return false;
  const nlohmann::json run = field(nlohmann::json::parse(saved.trainer_json, nullptr, false), "run");
  return run.is_string() && run.get_ref<const std::string&>() == ctx_.launch_env().run_id;
}

StatusOr<std::string> Checkpointer::choose() {
  // A restart continues the run: checkpoint.resume = "never" started it over (and its
  // saves then replaced this run's), a path went back to where the first attempt began
  // (refused once keep_last had pruned it). "auto" finds the newest anyway.
  const CheckpointConfig& c = config_.checkpoint;
  if (restarted() && c.resume != ResumeMode::kAuto) {
    StatusOr<std::string> latest = find_latest_checkpoint(c.dir);
    StatusOr<CheckpointInfo> info = latest.ok() ? read_checkpoint_info(*latest) : latest.status();
    if (info.ok() && saved_by_this_run(info->state)) {
      say_restart_continues();
      return latest;
    }
  }
  return choose_as_configured();
}

void Checkpointer::say_restart_continues() {
  const CheckpointConfig& c = config_.checkpoint;
  console_.line("checkpoint: attempt " + std::to_string(ctx_.launch_env().attempt) +
                " continues this run from its newest checkpoint, not checkpoint.resume = \"" +
                (c.resume == ResumeMode::kNever ? std::string("never") : c.resume_path) + "\"");
}

StatusOr<std::string> Checkpointer::choose_as_configured() {
  const CheckpointConfig& c = config_.checkpoint;
  switch (c.resume) {
    case ResumeMode::kNever: {
      // Starting over in a folder of an earlier run's checkpoints replaces its steps as
      // this run reaches them (and keep_last counts its lower ones): said before it does.
      // (The steps as they are: find_latest_checkpoint would follow and warn about `latest`
      // as if resuming.)
      const std::vector<int64_t> earlier = c.dir.empty() ? std::vector<int64_t>() : checkpoint::complete_steps(c.dir);
      if (!earlier.empty()) {
        console_.line("checkpoint: checkpoint.resume = \"never\" starts this run over in " + c.dir +
                      ", which holds an earlier run's checkpoints (the newest " + checkpoint_dir_name(earlier.back()) +
                      "): this run's saves replace the steps they reach" +
                      (c.keep_last > 0 ? ", and checkpoint.keep_last counts and removes the earlier ones below them"
                                       : "") +
                      "; give it another checkpoint.dir to keep them");
      }
      return std::string();
    }
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

StatusOr<int64_t> Checkpointer::latest_step_here() {
  const CheckpointConfig& c = config_.checkpoint;
  StatusOr<std::string> latest = find_latest_checkpoint(c.dir);
  if (!latest.ok() && latest.status().code() == StatusCode::kNotFound) return int64_t{-1};
  if (latest.ok()) {
    StatusOr<CheckpointInfo> info = read_checkpoint_info(*latest);
    // On a restart that follows another checkpoint.resume than "auto": this run's only.
    if (info.ok()) return c.resume != ResumeMode::kAuto && !saved_by_this_run(info->state) ? -1 : info->state.step;
    latest = info.status();
  }
  return Status(latest.status().code(), config_.where("checkpoint.dir") + ": looking for a checkpoint to resume in "
                                            "checkpoint.dir = \"" + c.dir + "\" on this node (rank " +
                                            std::to_string(ctx_.rank()) + "): " + latest.status().message());
}

StatusOr<int64_t> common_resume_step(const std::vector<int64_t>& node_steps, const std::string& dir) {
  if (node_steps.empty()) return int64_t{-1};
  const auto [low, high] = std::minmax_element(node_steps.begin(), node_steps.end());
  if (*low >= 0 || *high < 0) return *low;  // every node has one (take the oldest), or none has
  std::string have, lack;
  for (size_t n = 0; n < node_steps.size(); ++n) {
    std::string& list = node_steps[n] >= 0 ? have : lack;
    list += (list.empty() ? "" : ", ") + std::to_string(n);
  }
  return Status(StatusCode::kNotFound,
                "checkpoint.storage = \"per-node\": node(s) " + lack + " have no checkpoint in " + dir +
                    " but node(s) " + have + " do (up to step " + std::to_string(*high) +
                    "): copy a step-N directory to the nodes that lack it, or set checkpoint.resume to start over "
                    "(\"never\") or from a path");
}

StatusOr<std::string> Checkpointer::choose_per_node(const std::string& key, int nodes) {
  std::vector<int64_t> steps;
  for (int n = 0; n < nodes; ++n) {
    ZDP_ASSIGN_OR_RETURN(const std::string v, ctx_.store().get(key + "/node/" + std::to_string(n), ctx_.collective_timeout()));
    if (v.rfind(kChoiceError, 0) == 0) {
      return Status(StatusCode::kAborted, "node " + std::to_string(n) + ": " + v.substr(sizeof(kChoiceError) - 1));
    }
    // Another rank wrote it (std::to_string of a step, or -1 for none): still checked, so
    // that a damaged value is a message naming the node, not an exception.
    int64_t step = 0;
    if (!parse_decimal(v, -1, INT64_MAX, &step)) {
      return Status(StatusCode::kInvalidArgument, "node " + std::to_string(n) + " reported '" + v.substr(0, 64) +
                                                      "' as its latest checkpoint step, which is not a step number");
    }
    steps.push_back(step);
  }
  StatusOr<int64_t> step = common_resume_step(steps, config_.checkpoint.dir);
  if (!step.ok()) {
    return Status(step.status().code(), config_.where("checkpoint.storage") + ": " + step.status().message());
  }
  return *step < 0 ? std::string() : checkpoint_dir_name(*step);
}

StatusOr<std::string> Checkpointer::agree_on_checkpoint() {
  // Rank 0 decides and publishes under a key numbered by the call (the store counts every
  // rank's arrival; calls are separated by the collective load, so their numbers differ).
  const CheckpointConfig& c = config_.checkpoint;
  const int K = ctx_.world_size();
  Store& store = ctx_.store();
  ZDP_ASSIGN_OR_RETURN(const int64_t arrival, store.add("dp-train/resume/arrivals", 1));
  const std::string key = "dp-train/resume/" + std::to_string((arrival - 1) / K);
  // Node-local disks: each node has its own copies, and a crash during a save can leave
  // one node a step ahead of another. Every node's local rank 0 reports its newest step,
  // and the job resumes from the newest step every node has (the oldest of those).
  const bool node_local =
      (c.resume == ResumeMode::kAuto || restarted()) && !c.dir.empty() && c.storage == CheckpointStorage::kPerNode;
  const int local_world = std::max(1, ctx_.launch_env().local_world_size);
  const int nodes = (K + local_world - 1) / local_world;
  // Nodes of LOCAL_WORLD_SIZE consecutive ranks, as the engine's per-node save needs
  // (a cyclic Slurm distribution or uneven nodes left a node key that nobody wrote, and
  // rank 0 waited out the collective timeout). A rank that does not fit says so under its
  // node's key, so that rank 0 stops at once too.
  if (node_local && (K % local_world != 0 || ctx_.local_rank() >= local_world ||
                     ctx_.rank() % local_world != ctx_.local_rank())) {
    const Status bad(StatusCode::kInvalidArgument,
                     config_.where("checkpoint.storage") + ": checkpoint.storage = \"per-node\" needs nodes of "
                         "LOCAL_WORLD_SIZE consecutive ranks: rank " + std::to_string(ctx_.rank()) + " is local rank " +
                         std::to_string(ctx_.local_rank()) + " of " + std::to_string(local_world) + " in a world of " +
                         std::to_string(K) + " (a block distribution of ranks to nodes, or shared storage)");
    const std::string text = kChoiceError + bad.to_string();
    ZDP_RETURN_IF_ERROR(store.set(key + "/node/" + std::to_string(ctx_.rank() / local_world), text));
    if (ctx_.rank() == 0) ZDP_RETURN_IF_ERROR(store.set(key, text));  // the others wait for rank 0's choice
    return bad;
  }
  if (node_local && ctx_.local_rank() == 0) {
    StatusOr<int64_t> step = latest_step_here();
    ZDP_RETURN_IF_ERROR(store.set(key + "/node/" + std::to_string(ctx_.rank() / local_world),
                                  step.ok() ? std::to_string(*step) : kChoiceError + step.status().to_string()));
  }
  if (ctx_.rank() == 0) {
    StatusOr<std::string> chosen = node_local ? choose_per_node(key, nodes) : choose();
    // Per-node on a restart before this run saved one: checkpoint.resume's path, as is.
    const bool as_configured = node_local && chosen.ok() && chosen->empty() && c.resume != ResumeMode::kAuto;
    if (as_configured) {
      chosen = choose_as_configured();
    } else if (node_local && c.resume != ResumeMode::kAuto && chosen.ok() && !chosen->empty()) {
      say_restart_continues();  // per node, as choose() says it for shared storage
    }
    const std::string published = !chosen.ok() ? kChoiceError + chosen.status().to_string()
                                  : as_configured && !chosen->empty() ? kChoicePath + *chosen
                                                                       : *chosen;
    ZDP_RETURN_IF_ERROR(store.set(key, published));
    if (!chosen.ok()) return chosen.status();
    return node_local && !as_configured && !chosen->empty() ? (fs::path(c.dir) / *chosen).string() : *chosen;
  }
  ZDP_ASSIGN_OR_RETURN(const std::string chosen, store.get(key, ctx_.collective_timeout()));
  if (chosen.rfind(kChoiceError, 0) == 0) {
    return Status(StatusCode::kAborted,
                  "rank 0 could not choose the checkpoint to resume: " + chosen.substr(sizeof(kChoiceError) - 1));
  }
  if (chosen.rfind(kChoicePath, 0) == 0) return chosen.substr(sizeof(kChoicePath) - 1);
  // Per-node: the same step-N directory under this node's own checkpoint.dir.
  return node_local && !chosen.empty() ? (fs::path(c.dir) / chosen).string() : chosen;
}

StatusOr<ResumePoint> Checkpointer::resume() {
  ZDP_ASSIGN_OR_RETURN(const std::string chosen, agree_on_checkpoint());
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
    return Status(loaded.status().code(), config_.where("checkpoint.resume") + ": " + setting + ": " +
                                              in_config_terms(loaded.status().message()));
  }
  point.step = loaded->step;
  point.data_position = loaded->data_position;
  point.path = loaded->path.empty() ? chosen : loaded->path;
  console_.line("checkpoint: resumed from " + point.path + " in " + fixed(seconds_since(start), 2) +
                " s: continuing at step " + std::to_string(point.step) + " at data position " +
                std::to_string(point.data_position) + position_in_epoch(point.data_position, dataset_.samples) +
                " (optimizer step " + std::to_string(loaded->optimizer_steps) + " for the LR schedule)");
  for (const std::string& note : resume_notes(*loaded, config_, ctx_.world_size(), dataset_, held_out_)) {
    console_.line("checkpoint: note: " + note);
  }
  // The loss curve so far, continued by this run's steps.
  StatusOr<LossHistory> history = saved_history(loaded->trainer_json, point.step);
  if (history.ok()) point.history = std::move(*history);
  else console_.line("checkpoint: note: " + history.status().message() + ": loss.svg starts at step " + std::to_string(point.step));
  return point;
}

Status Checkpointer::save(int64_t step, int64_t data_position, const LossHistory& history) {
  CheckpointState state;
  state.step = step;
  state.data_position = data_position;
  nlohmann::json trainer = trainer_state(config_, dataset_, history, held_out_);
  if (!ctx_.launch_env().run_id.empty()) trainer["run"] = ctx_.launch_env().run_id;  // restarts find it (choose)
  state.trainer_json = trainer.dump();
  SaveOptions options;
  options.keep = config_.checkpoint.keep_last;
  options.storage = config_.checkpoint.storage;
  // The engine logs (rank 0) where it saved, how many bytes and how long it took.
  StatusOr<std::string> path = engine_.save_checkpoint(config_.checkpoint.dir, state, options);
  if (!path.ok()) {
    return Status(path.status().code(), "saving the checkpoint of step " + std::to_string(step) + " under " +
                                            config_.checkpoint.dir + ": " + in_config_terms(path.status().message()));
  }
  return Status::Ok();
}

std::string in_config_terms(std::string message) {
  // dp-train loads a checkpoint whole: it has no weights-only load to offer.
  const std::pair<const char*, const char*> terms[] = {
      {"or load weights only (LoadScope::kWeightsOnly) to start the optimizer afresh",
       "or start over with checkpoint.resume = \"never\" (dp-train resumes the whole state)"},
      {" (load with LoadScope::kWeightsOnly to take the weights alone)", " (dp-train resumes the whole state)"},
      {"use CheckpointStorage::kShared here", "set checkpoint.storage = \"shared\""},
  };
  for (const auto& [api, config] : terms) {
    for (size_t at = message.find(api); at != std::string::npos; at = message.find(api, at + std::strlen(config))) {
      message.replace(at, std::strlen(api), config);
    }
  }
  return message;
}

}  // namespace zdp::trainer
