// dp-train's side of checkpoints ([checkpoint] in the config): when to save, what the
// trainer stores beside the engine's tensors (the step, the data position, the config
// used and its seeds), and resuming: which checkpoint, loading it into the engine, and
// checking that it suits this run. The format itself is zdp/checkpoint.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/data/same_data.h"
#include "trainer/loop/console.h"
#include "trainer/loop/loss_history.h"
#include "zdp/checkpoint.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/engine.h"

namespace zdp::trainer {

// Where a run starts: step 0 at data position 0, or where a checkpoint left off.
struct ResumePoint {
  int64_t step = 0;           // optimizer steps already taken
  int64_t data_position = 0;  // the next position in the sampler's stream of epochs (sampler.h)
  std::string path;           // the step-<N> directory loaded; "" = from scratch
  LossHistory history;        // the saved run's curve (empty from scratch, or when the checkpoint has none)
};

// What dp-train stores as CheckpointState::trainer_json: the config used (TOML text), the
// seed, what the data position means (the training set's size and fingerprint, shuffle,
// global batch) and what the held-out points measured (the held-out set's size and
// fingerprint, the samples an evaluation reads), so that a resume can say what changed,
// and the loss history up to the save ("history"), so that a resumed run's loss.svg
// continues the curve.
nlohmann::json trainer_state(const Config& config, const DataIdentity& dataset, const LossHistory& history = {},
                             const DataIdentity& held_out = {});

// Notes on what differs between the run that saved `saved` and this one (world size,
// stage, global batch, dataset, seed...), one line each; empty when nothing does. None of
// them stops a resume: the engine refuses another model, everything else is allowed.
std::vector<std::string> resume_notes(const CheckpointState& saved, const Config& config, int world_size,
                                      const DataIdentity& dataset, const DataIdentity& held_out = {});

// The loss history (trainer_state's "history") of a checkpoint saved at `step`: empty
// when it has none (another trainer's, or an older dp-train's); kInvalidArgument, for a
// console note, when it is malformed or runs past `step` (an edited file: the resumed
// steps would run the curve backwards).
StatusOr<LossHistory> saved_history(const std::string& trainer_json, int64_t step);

// checkpoint.storage = "per-node": the step to resume from given each node's newest step
// (-1: none on that node): the oldest of them when every node has one (a crash during a
// save may have left some nodes a step ahead; keep_last >= 2 keeps the older one there),
// -1 when no node has one. kNotFound naming the nodes when only some have one. `dir`
// names checkpoint.dir in the message.
StatusOr<int64_t> common_resume_step(const std::vector<int64_t>& node_steps, const std::string& dir);

// True when a checkpoint is due after `done` of train.steps steps: every
// checkpoint.every_steps steps and after the last one, when checkpoint.dir is set.
bool checkpoint_due(const Config& config, int64_t done);

// An engine's checkpoint error in dp-train's terms: the API settings its advice names
// (LoadScope::kWeightsOnly, CheckpointStorage::kShared) as what dp-train's config can do.
std::string in_config_terms(std::string engine_message);

// The checkpoints of one run. Every method is collective (every rank calls it).
class Checkpointer {
 public:
  // REQUIRES: the engine is finalized; `ctx`, `engine`, `config` and `console` outlive it.
  Checkpointer(Context& ctx, Engine& engine, const Config& config, Console& console, DataIdentity dataset,
               DataIdentity held_out);

  // Resumes as checkpoint.resume says: "never" starts from scratch; "auto" loads the
  // newest checkpoint in checkpoint.dir if there is one; a path loads that checkpoint
  // (a step-<N> directory, or a directory holding step-<N>/ and latest). Rank 0 chooses
  // the checkpoint and the others follow it (through the store), so every rank loads the
  // same one; with per-node storage the step every node has (common_resume_step), each
  // node reading its own copy. Errors name the config key and what is wrong.
  // A restarted attempt (dp-launch's launch.max_restarts) resumes from the newest
  // checkpoint this run saved (dp-launch's ZDP_RUN_ID in its trainer state), whatever
  // checkpoint.resume says; as checkpoint.resume says while the run has saved none.
  StatusOr<ResumePoint> resume();

  // Saves step `step` (data position `data_position`, the curve so far `history`) under
  // checkpoint.dir, keeping checkpoint.keep_last. The engine logs where, how big and how
  // long it took.
  Status save(int64_t step, int64_t data_position, const LossHistory& history);

 private:
  // The checkpoint to load, as rank 0 decides: this run's newest on a restart, else
  // choose_as_configured(). "" for none.
  StatusOr<std::string> choose();
  // The checkpoint checkpoint.resume names: "" for none.
  StatusOr<std::string> choose_as_configured();
  // A restart by dp-launch of a run that names itself (ZDP_RUN_ID) and saves checkpoints.
  bool restarted() const;
  // Rank 0's console line: this attempt continues the run, not where checkpoint.resume says.
  void say_restart_continues();
  // Whether `saved` (a checkpoint's state) holds this run's ZDP_RUN_ID in its trainer state.
  bool saved_by_this_run(const CheckpointState& saved) const;
  // This node's newest checkpoint step in checkpoint.dir, -1 for none (on a restart
  // that follows another checkpoint.resume than "auto": -1 unless this run saved it).
  StatusOr<int64_t> latest_step_here();
  // Rank 0, per-node storage: "step-<N>" every node has (from the nodes' reports under
  // `key`/node/<n>), "" for none.
  StatusOr<std::string> choose_per_node(const std::string& key, int nodes);
  // The step-<N> directory every rank loads ("" for none), agreed through the store.
  StatusOr<std::string> agree_on_checkpoint();

  Context& ctx_;
  Engine& engine_;
  const Config& config_;
  Console& console_;
  DataIdentity dataset_;   // the training set's
  DataIdentity held_out_;  // the held-out set's (samples -1: none)
};

}  // namespace zdp::trainer
