// The engine's checkpoint I/O (engine_checkpoint_save.cc, engine_checkpoint_load.cc)
// and what saving and loading share: the file plan (which tensor sits where in the two
// safetensors files), the mapping from a slice of a bucket to byte ranges of those files,
// moving bytes between device buffers and files, and the agreement step that makes every
// rank fail together, naming the rank that failed. It sees only CheckpointParts: where
// every element lives (options, layout) and the sharded optimizer state it writes and
// reads; the parameters and gradients are the engine's to restore afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/src/engine_env.h"
#include "engine/src/host_collective.h"  // all_reduce_i64
#include "engine/src/layout.h"
#include "runtime/internal/checkpoint_values.h"
#include "engine/src/optimizer_state.h"
#include "zdp/checkpoint.h"
#include "zdp/safetensors.h"
#include "zdp/store.h"

namespace zdp::checkpoint {

// What a save reads and a load writes.
struct CheckpointParts {
  EngineEnv& env;
  const EngineOptions& opt;
  const Layout& layout;
  OptimizerState& state;

  int num_buckets() const { return static_cast<int>(layout.buckets().size()); }
  const Bucket& bucket(int b) const { return layout.buckets()[static_cast<size_t>(b)]; }
  const ParamPlacement& placement(int p) const { return layout.params()[static_cast<size_t>(p)]; }
};

// Collective: writes the checkpoint of zdp/checkpoint.h (Engine::save_checkpoint's
// contract) from every rank's owned slices; store keys under `store`'s prefix.
// `misuse`: this rank's own reason not to save (a step or a layer scope open): it still
// takes part in the first agreement, so every rank fails at once naming it.
StatusOr<std::string> save(CheckpointParts& c, Store& store, const std::string& root, const CheckpointState& state,
                           const SaveOptions& options, const Status& misuse = Status::Ok());
// Collective: reads the checkpoint at `path_or_root` into the masters (and with
// LoadScope::kFull the moments, step count and loss scale). Everything but the checksums
// is checked before the first byte changes; a failure after that breaks the engine
// (c.env.failure). Returns the saved state, `path` the directory read.
// `misuse` as save()'s.
StatusOr<CheckpointState> load(CheckpointParts& c, Store& store, const std::string& path_or_root,
                               const LoadOptions& options, const Status& misuse = Status::Ok());

// Per parameter (registration order): byte offsets in the data regions of the files.
struct FileOffsets {
  std::vector<int64_t> model;               // fp32 master
  std::vector<std::vector<int64_t>> state;  // per moment, in OptimizerState::moments() order
};

// The headers this engine writes: its parameters in registration order, F32, with
// metadata {"format": "pt", "producer": "zdp <version>"}; and where each tensor starts.
struct FilePlan {
  safetensors::Header model;
  safetensors::Header optimizer;
  FileOffsets offsets;
};
StatusOr<FilePlan> plan_files(const CheckpointParts& c);

// Matches a checkpoint's headers against the engine's parameters and returns where each
// parameter's tensors start in those files. `optimizer` may be null (weights only). The
// first difference is named: another optimizer's state (the checkpoint's and the
// configured optimizer named), a missing tensor, a different shape or dtype, or a tensor
// the model lacks.
StatusOr<FileOffsets> match_files(const CheckpointParts& c, const safetensors::Reader& model,
                                  const safetensors::Reader* optimizer);

// One contiguous run: `count` fp32 elements at byte `file` of a data region (relative to
// a tensor's start already added) and at element `mem` of an engine buffer.
struct Piece {
  int64_t file = 0;
  int64_t mem = 0;
  int64_t count = 0;
};
// How `mem` counts: from the flat buffer's start (stage-0 state), from the start of the
// rank's shard (stages 1-3), or from the start of the bucket (a gathered bucket).
enum class MemBase { kFlat, kShard, kBucket };
// The pieces of slice `slice` of bucket `bucket` (padding excluded), coalesced, with
// file offsets from `tensor_offsets` (one of FileOffsets' vectors).
std::vector<Piece> slice_pieces(const Layout& layout, int bucket, int slice, MemBase base,
                                const std::vector<int64_t>& tensor_offsets);

// Moves fp32 elements between engine buffers (device memory) and files: on the CPU
// straight from/to the buffers, on CUDA through one pinned staging buffer.
class FileIo {
 public:
  static StatusOr<FileIo> create(EngineEnv& env);
  // Writes the piece's values from `base` (device memory), feeding them to `check` before
  // they reach the file.
  Status write(safetensors::Writer& file, const Piece& piece, const float* base, ValueCheck& check);
  // Reads data bytes [file, file + bytes) into `dst` (device memory), feeding them to
  // `check` before they leave the host.
  Status read(const safetensors::Reader& file, int64_t offset, int64_t bytes, void* dst, ValueCheck& check);
  // Copies host bytes into device memory.
  Status to_device(void* dst, const void* src, int64_t bytes);

 private:
  explicit FileIo(EngineEnv& env) : env_(&env) {}
  EngineEnv* env_;
  DeviceBuffer staging_;  // CUDA only
};

// A collective: OK on every rank when `mine` is OK on every rank. Otherwise each failing
// rank returns its own status, and the others kAborted "rank r: <phase>: rank q failed:
// <q's message>" for the lowest failing rank q (messages travel through `store`). A
// communicator failure (a dead peer) is returned as it is, with the phase.
Status agree(EngineEnv& env, Store& store, const std::string& phase, const Status& mine);

}  // namespace zdp::checkpoint
