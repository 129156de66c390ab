// Checkpoints that any world size and stage can load: the on-disk format, what the
// trainer stores beside the tensors, and the functions that find, inspect and verify a
// checkpoint without an engine. Saving and loading are Engine::save_checkpoint /
// Engine::load_checkpoint (engine.h): collective calls over the engine's slices.
//
// Layout of one checkpoint (everything topology-neutral: no rank, slice or bucket
// appears in any file):
//
//   <root>/step-<N>/model.safetensors      fp32 master weights, full (unsharded), one
//                                          tensor per parameter under its registered name,
//                                          in registration order. A plain safetensors file:
//                                          `safetensors.torch.load_file` opens it.
//   <root>/step-<N>/optimizer.safetensors  the optimizer's state under torch's names, only
//                                          what the optimizer keeps. AdamW: every
//                                          "<name>.exp_avg" (m) in registration order, then
//                                          every "<name>.exp_avg_sq" (v). SGD with momentum:
//                                          every "<name>.momentum_buffer". SGD without
//                                          momentum: no tensors. Loading a checkpoint whose
//                                          state is another optimizer's is refused (naming
//                                          both) unless the scope is kWeightsOnly.
//   <root>/step-<N>/state.json             format version, the trainer's step, data
//                                          position and JSON, the engine's optimizer step
//                                          count (the LR schedule position), loss-scaler
//                                          state, seed, world size, stage and compute dtype
//                                          at save time, the library version, and the
//                                          checksums of both files (below).
//   <root>/latest                          "step-<N>\n": the newest complete checkpoint,
//                                          replaced atomically (written beside, renamed).
//
// Atomicity: a save writes everything into <root>/step-<N>.tmp/, fsyncs the files, writes
// state.json last, fsyncs it, renames the directory to step-<N>, fsyncs <root>, then
// replaces `latest`. A step-<N> directory therefore exists only when complete, and a
// crash at any moment leaves every earlier checkpoint intact; a leftover *.tmp directory
// is never read, and the next save removes it. Saving a step that already exists
// replaces it (the old directory is removed only after the new one is in place).
//
// Parallel write: rank 0 (per node in kPerNode mode) creates both files at their final
// size with their headers; after a barrier each rank pwrite()s the byte ranges of the
// elements it owns (its slice of every bucket; padding is never written), straight from
// its shard: no rank ever holds more than its own slices (plus one bucket in kPerNode
// mode). A save costs one pass over each rank's slices, and one read-back pass for the
// checksums.
//
// Checksums: XXH3-64 (libxxhash) of fixed-size chunks of each file's data region (the
// bytes after the header; chunk i covers [i * chunk_bytes, (i + 1) * chunk_bytes)), plus
// one of the header. Chunks are independent of the world size, so after the write
// barrier rank r hashes the chunks i with i % K == r (reading them back from disk) and
// the results are combined over the communicator. On load each rank verifies every
// chunk it reads a byte of (it reads those chunks whole, so the extra reading is at most
// two chunks per owned slice); together the ranks verify every chunk they load.
// verify_checkpoint() recomputes all of them.
//
// Node-local disks (CheckpointStorage::kPerNode): there is no shared filesystem, so
// every node keeps a FULL copy under the same <root> path on its own disk: for each
// bucket the ranks all-gather the fp32 master, m and v (one bucket at a time, so memory
// stays one bucket), and local rank l of every node writes the slices s with
// s % LOCAL_WORLD_SIZE == l. Each node's local rank 0 creates, renames, updates `latest`
// and prunes on its node. The checksums are computed on every node and must agree
// across nodes. Trade-off: each node writes (and the network carries) the whole model
// instead of 1/nodes of it, in exchange for a checkpoint that any node, and any later
// topology, can load from its own disk. Nodes are consecutive blocks of
// LOCAL_WORLD_SIZE ranks (torchrun's numbering). A kPerNode save whose <root> turns out
// to be shared between nodes is refused (each node's marker file would see the others).
//
// Fault injection (tests only): when the environment variable ZDP_CKPT_FAULT is set to
// "rank=R,at=POINT[,step=N][,attempt=A][,action=X][,ms=M]", rank R ends itself with
// _exit(86) at POINT of a save (of step N only, and in launcher attempt A = $ZDP_ATTEMPT
// only, when given); action kill (SIGKILL), stop (SIGSTOP) or slow (sleep M ms, then go
// on) instead of the exit serve the liveness tests:
//   create    after the files exist and this rank opened them, before it writes
//   write     after this rank wrote its ranges, before its fsync
//   checksum  after the checksums are combined, before state.json
//   commit    (the committing rank) after state.json is written, before the rename
//   latest    (the committing rank) after the rename, before `latest` is updated
// The survivors fail at their next collective with the dead peer named, as after any
// crash; the checkpoint being written is left as step-N.tmp (or, for `latest`, complete).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp {

// What a checkpoint holds besides the tensors.
struct CheckpointState {
  // ---- Set by the trainer before save_checkpoint(); returned unchanged by load.
  int64_t step = 0;           // the trainer's step counter: the directory is step-<step>;
                              // at least the optimizer steps taken, below 10^18
  int64_t data_position = 0;  // the data loader's position: samples consumed by all ranks
                              // so far (with shuffling, not the next sample's dataset index)
  std::string trainer_json;   // any JSON value as text (the config used, seeds, ...);
                              // "" stands for {}. Stored as JSON under "trainer" in
                              // state.json, so it must parse (kInvalidArgument otherwise).
                              // Load returns it re-serialised (same value, compact form).

  // ---- Filled by the engine: save ignores what the caller put here; load and
  // read_checkpoint_info() return the values of the checkpoint (as saved).
  int world_size = 0;                 // K at save time
  int stage = 0;                      // ZeRO stage at save time
  std::string compute_dtype;          // "fp32", "bf16", "fp16"
  int64_t seed = 0;                   // EngineOptions::seed (initialisation, stochastic rounding)
  int64_t optimizer_steps = 0;        // optimizer steps the engine took (skipped ones not
                                      // counted): the LR schedule position and AdamW's bias
                                      // correction step. Restored by load.
  double loss_scale = 1.0;            // fp16 dynamic loss scale (1 otherwise). Restored by load.
  int64_t loss_scale_good_steps = 0;  // finite steps since its last change. Restored.
  std::string storage;                // "shared" or "per-node"
  std::string library_version;        // ZDP_VERSION_STRING of the saving build
  std::string path;                   // load / read_checkpoint_info: the step-<N> directory read
};

// Where the files of a save go; see the top of this file.
enum class CheckpointStorage { kShared, kPerNode };
const char* to_string(CheckpointStorage storage);

struct SaveOptions {
  int keep = 0;  // after a successful save, keep this many step-<N> directories under
                 // root: the newest up to the step just saved, which is never deleted; older
                 // ones are deleted, higher steps (another run's) left alone (0: keep all)
  CheckpointStorage storage = CheckpointStorage::kShared;
  int64_t chunk_bytes = int64_t{4} << 20;  // checksum chunk (4 MiB): smaller chunks cost a
                                           // longer state.json, larger ones more extra
                                           // reading on load; in (0, 1 GiB]
};

// Whether to restore the optimizer: kFull restores master weights, m, v, the optimizer
// step count and the loss scale (resuming a run); kWeightsOnly restores only the master
// weights (and the compute-dtype parameters), leaving m and v at zero and the step count
// at 0 (fine-tuning from a checkpoint; optimizer.safetensors is not read).
enum class LoadScope { kFull, kWeightsOnly };
// kVerify checks the checksum of every chunk read; kSkip trusts the files (faster; a
// header, size, name or shape mismatch is still refused).
enum class ChecksumPolicy { kVerify, kSkip };

struct LoadOptions {
  LoadScope scope = LoadScope::kFull;
  ChecksumPolicy checksums = ChecksumPolicy::kVerify;
};

// File and directory names of the format.
inline constexpr const char* kCheckpointModelFile = "model.safetensors";
inline constexpr const char* kCheckpointOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kCheckpointStateFile = "state.json";
inline constexpr const char* kCheckpointLatestFile = "latest";
inline constexpr const char* kExpAvgSuffix = ".exp_avg";
inline constexpr const char* kExpAvgSqSuffix = ".exp_avg_sq";
inline constexpr const char* kMomentumBufferSuffix = ".momentum_buffer";  // SGD with momentum
// Version 2 adds "state_checksum", the XXH3-64 of state.json's own content (verified on
// every read); version 1 files (no checksum) are still read.
inline constexpr int kCheckpointFormatVersion = 2;
// The largest global sample position (data_position) a checkpoint may hold: 2^62, so that
// a run of many more steps still cannot overflow int64.
inline constexpr int64_t kMaxDataPosition = int64_t{1} << 62;
// The largest checksum chunk (SaveOptions::chunk_bytes): loading and verifying read one
// chunk at a time into a buffer of this size.
inline constexpr int64_t kMaxChecksumChunkBytes = int64_t{1} << 30;
// "step-<step>".
std::string checkpoint_dir_name(int64_t step);

// The checkpoint to resume from under `root`: the one `latest` names when that is a
// complete checkpoint (a directory step-<N> holding state.json), else (no `latest`, or
// one naming a removed directory) the complete one with the highest step. After a crash
// between the rename and the update of `latest` this is the previous checkpoint: the
// resumed run redoes those steps and saves over the newer one. kNotFound when `root`
// does not exist or holds none: a trainer with resume = auto then starts from scratch.
StatusOr<std::string> find_latest_checkpoint(const std::string& root);

// `path` itself when it is a checkpoint directory (holds state.json), else
// find_latest_checkpoint(path). kNotFound names the path and what was looked for.
StatusOr<std::string> resolve_checkpoint(const std::string& path_or_root);

// One file of a checkpoint as state.json describes it.
struct CheckpointFileInfo {
  std::string name;          // "model.safetensors"
  int64_t bytes = 0;         // the whole file
  int64_t header_bytes = 0;  // 8 + the JSON header (padded): where the data starts
  int64_t chunk_bytes = 0;
  uint64_t header_hash = 0;            // XXH3-64 of the first header_bytes bytes
  std::vector<uint64_t> chunk_hashes;  // XXH3-64 of each data chunk
};

struct CheckpointInfo {
  CheckpointState state;
  std::vector<CheckpointFileInfo> files;  // model first, then optimizer
  int64_t params = 0;                     // tensors in model.safetensors
  int64_t elements = 0;                   // their elements
};

// Reads and checks state.json of a checkpoint (resolved as resolve_checkpoint does):
// kInvalidArgument naming the file and field for a malformed one, or a format version
// this build does not read. Reads no tensor data.
StatusOr<CheckpointInfo> read_checkpoint_info(const std::string& path_or_root);

struct VerifyReport {
  std::string path;  // the step-<N> directory verified
  int64_t files = 0;
  int64_t chunks = 0;
  int64_t bytes = 0;
};

// Recomputes every checksum of a checkpoint (both files, headers and all chunks) and
// checks the file sizes, the safetensors headers, and that the optimizer file holds m
// and v for exactly the model's tensors. The first problem is returned naming the file,
// the chunk and its byte range (kIoError for a damaged or truncated file, kNotFound for a
// missing one). What `dp-ckpt verify` runs.
// `scope` kModel checks the model file (and state.json) only: what `dp-ckpt export`
// reads, so a damaged optimizer file does not block exporting intact weights.
enum class VerifyScope { kAll, kModel };
StatusOr<VerifyReport> verify_checkpoint(const std::string& path_or_root, VerifyScope scope = VerifyScope::kAll);

}  // namespace zdp
