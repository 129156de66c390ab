// The directory side of checkpoints (zdp/checkpoint.h, "Atomicity"): creating the
// temporary directory, the durable rename into place, the `latest` pointer, pruning, and
// finding the newest complete checkpoint. POSIX calls; errors name the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp::checkpoint {

// The largest step a checkpoint directory's name spells (step_of reads at most 18 digits):
// a save refuses a larger one, which find_latest and prune would never see.
inline constexpr int64_t kMaxStep = 999999999999999999;

// mkdir -p.
Status make_dirs(const std::string& path);
// fsync of a directory: a rename or a new entry in it is durable afterwards.
Status sync_dir(const std::string& path);
// rm -rf (a missing path is not an error).
Status remove_tree(const std::string& path);
// Writes `text` to dir/name durably and atomically: dir/name.tmp.<pid> (created
// exclusively, never through a link), fsync, rename, fsync dir.
Status write_file_atomic(const std::string& dir, const std::string& name, const std::string& text);
// Creates dir/name with `text` and fsyncs it (no rename: the directory is renamed later);
// a symbolic link at `path` is refused, not followed.
Status write_file_synced(const std::string& path, const std::string& text);

// Steps of the complete checkpoints under root (step-<N> directories holding state.json),
// ascending. A missing root has none.
std::vector<int64_t> complete_steps(const std::string& root);
// Removes what interrupted saves leave under root: step-<N>.tmp, step-<N>.pruned, and
// step-<N>.old where step-<N> exists (a complete step-<N>.old without it is renamed back
// to step-<N>).
Status remove_leftovers(const std::string& root);
// Moves root/<tmp_name> to root/step-<step> durably. An existing step-<step> is exchanged
// with it atomically (renameat2) and then removed; where the file system cannot exchange,
// it is renamed to step-<step>.old first and removed after the new one is in place, and
// remove_leftovers() restores it after a crash in between.
Status commit_dir(const std::string& root, const std::string& tmp_name, int64_t step);
// Removes the complete checkpoints of steps up to `latest` (the one just written) but the
// `keep` newest of them (keep <= 0: none). Higher steps are another run's (a run with
// resume = "never", or resumed from an older checkpoint, into the same folder): they are
// neither counted nor removed, so the run keeps its own `keep` checkpoints (they counted
// and the run's own were removed: keep_last 2 left one of this run's beside two stale).
// Each is renamed to step-<N>.pruned before its removal, so that a crash in between never
// leaves a step-<N> with state.json and without its tensors.
Status prune(const std::string& root, int keep, int64_t latest);

bool is_dir(const std::string& path);
bool is_file(const std::string& path);
// "step-<digits><suffix>" -> the step (as checkpoint_dir_name spells it); -1 otherwise.
int64_t step_of(const std::string& name, const std::string& suffix);

}  // namespace zdp::checkpoint
