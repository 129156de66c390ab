// checkpoint::load, Engine::load_checkpoint's reading: restores a checkpoint saved at any
// world size and stage (zdp/checkpoint.h). Phases, each ending in an agreement across ranks:
//   open     resolve the directory, read state.json, open the files, check sizes, the
//            header checksums and every tensor name and shape (nothing changed yet)
//   read     each rank reads the byte ranges of its own slices, whole chunks at a time,
//            verifying each chunk's checksum and every value (finite; second moments
//            not negative) before using a byte of it
//   restore  step count and loss scale (the engine then recomputes the compute-dtype
//            parameters from the masters, as after an optimizer step)
#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/src/checkpoint/engine_checkpoint.h"
#include "runtime/internal/checkpoint_hash.h"
#include "zdp/log.h"

namespace zdp {
namespace {

using checkpoint::CheckpointParts;
using checkpoint::MemBase;
using checkpoint::Piece;

struct OpenedCheckpoint {
  std::string dir;
  CheckpointInfo info;
  const CheckpointFileInfo* model_info = nullptr;
  const CheckpointFileInfo* optimizer_info = nullptr;
  std::optional<safetensors::Reader> model;
  std::optional<safetensors::Reader> optimizer;  // kFull only
  checkpoint::FileOffsets offsets;
};

// Opens one file and checks it against its entry in state.json.
StatusOr<safetensors::Reader> open_file(const OpenedCheckpoint& c, const CheckpointFileInfo& entry, bool verify) {
  const std::string path = c.dir + "/" + entry.name;
  StatusOr<safetensors::Reader> opened = safetensors::Reader::open(path);
  if (opened.status().code() == StatusCode::kNotFound) {
    return Status(StatusCode::kNotFound, path + " is missing (state.json lists it)");
  }
  ZDP_RETURN_IF_ERROR(opened.status());
  safetensors::Reader file = std::move(*opened);
  if (file.file_bytes() != entry.bytes || file.data_start() != entry.header_bytes) {
    return Status(StatusCode::kIoError, path + ": " + std::to_string(file.file_bytes()) + " bytes with a " +
                                            std::to_string(file.data_start()) + "-byte header, state.json says " +
                                            std::to_string(entry.bytes) + " and " + std::to_string(entry.header_bytes) +
                                            " (a truncated or replaced file)");
  }
  if (verify) {
    ZDP_ASSIGN_OR_RETURN(const std::string head, file.read_header_bytes());
    const uint64_t h = checkpoint::hash_bytes(head.data(), head.size());
    if (h != entry.header_hash) {
      return Status(StatusCode::kIoError, path + ": the header (bytes [0, " + std::to_string(head.size()) +
                                              ")) has checksum " + checkpoint::hash_hex(h) + ", state.json says " +
                                              checkpoint::hash_hex(entry.header_hash) + " (the file is damaged)");
    }
  }
  return file;
}

StatusOr<OpenedCheckpoint> open_checkpoint(const CheckpointParts& parts, const std::string& path_or_root, bool full,
                                           bool verify) {
  OpenedCheckpoint c;
  ZDP_ASSIGN_OR_RETURN(c.dir, resolve_checkpoint(path_or_root));
  ZDP_ASSIGN_OR_RETURN(c.info, read_checkpoint_info(c.dir));
  for (const CheckpointFileInfo& f : c.info.files) {
    if (f.name == kCheckpointModelFile) c.model_info = &f;
    if (f.name == kCheckpointOptimizerFile) c.optimizer_info = &f;
  }
  const std::string state = c.dir + "/" + kCheckpointStateFile;
  if (c.model_info == nullptr) return Status(StatusCode::kInvalidArgument, state + " lists no " + kCheckpointModelFile);
  if (full && c.optimizer_info == nullptr) {
    return Status(StatusCode::kInvalidArgument, state + " lists no " + std::string(kCheckpointOptimizerFile) +
                                                    " (load with LoadScope::kWeightsOnly to take the weights alone)");
  }
  ZDP_ASSIGN_OR_RETURN(safetensors::Reader model, open_file(c, *c.model_info, verify));
  c.model.emplace(std::move(model));
  if (full) {
    ZDP_ASSIGN_OR_RETURN(safetensors::Reader optimizer, open_file(c, *c.optimizer_info, verify));
    c.optimizer.emplace(std::move(optimizer));
  }
  ZDP_ASSIGN_OR_RETURN(c.offsets, checkpoint::match_files(parts, *c.model, full ? &*c.optimizer : nullptr));
  return c;
}

// Reads `pieces` (ascending file offsets) of `file` into `base` (device memory). With
// `entry`, whole chunks are read and verified before any of their bytes is used; every
// value is checked against `rule` on the host.
Status read_pieces(checkpoint::FileIo& io, const safetensors::Reader& file, const CheckpointFileInfo* entry,
                   const std::vector<Piece>& pieces, float* base, checkpoint::ValueRule rule) {
  std::vector<char> chunk;
  int64_t cached = -1;
  checkpoint::ChunkRange range;
  for (const Piece& p : pieces) {
    const int64_t begin = p.file, end = p.file + p.count * 4;
    char* dst = reinterpret_cast<char*>(base + p.mem);
    checkpoint::ValueCheck check(file, begin, rule);
    if (entry == nullptr) {
      ZDP_RETURN_IF_ERROR(io.read(file, begin, end - begin, dst, check));
      continue;
    }
    const int64_t cb = entry->chunk_bytes;
    for (int64_t c = begin / cb; c * cb < end; ++c) {
      if (c != cached) {
        range = checkpoint::chunk_range(c, file.header().data_bytes(), cb);
        chunk.resize(static_cast<size_t>(range.end - range.begin));
        ZDP_RETURN_IF_ERROR(file.read(range.begin, chunk.data(), range.end - range.begin));
        const uint64_t h = checkpoint::hash_bytes(chunk.data(), chunk.size());
        const uint64_t expected = entry->chunk_hashes[static_cast<size_t>(c)];
        if (h != expected) {
          return Status(StatusCode::kIoError, checkpoint::mismatch_message(file.path(), c, range, h, expected));
        }
        cached = c;
      }
      const int64_t lo = std::max(begin, range.begin), hi = std::min(end, range.end);
      ZDP_RETURN_IF_ERROR(check.feed(chunk.data() + (lo - range.begin), hi - lo));
      ZDP_RETURN_IF_ERROR(io.to_device(dst + (lo - begin), chunk.data() + (lo - range.begin), hi - lo));
    }
  }
  return Status::Ok();
}

// This rank's pieces of one tensor set: its slice of every bucket (all of them at stage
// 0, where every rank holds the whole state), ascending in the file.
std::vector<Piece> owned_pieces(const CheckpointParts& c, const std::vector<int64_t>& offsets) {
  std::vector<Piece> out;
  for (int b = 0; b < c.num_buckets(); ++b) {
    for (int s = 0; s < c.env.world; ++s) {
      if (c.opt.zero.shards_optimizer() && s != c.env.rank) continue;
      const MemBase base = c.opt.zero.shards_optimizer() ? MemBase::kShard : MemBase::kFlat;
      for (const Piece& p : checkpoint::slice_pieces(c.layout, b, s, base, offsets)) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end(), [](const Piece& a, const Piece& b) { return a.file < b.file; });
  return out;
}

Status read_state(CheckpointParts& c, const OpenedCheckpoint& opened, bool full, bool verify) {
  // Padding stays zero; weights-only leaves the optimizer state (m, v: what it keeps) zero.
  ZDP_RETURN_IF_ERROR(c.state.clear());
  ZDP_RETURN_IF_ERROR(c.env.exec->synchronize(c.env.who + ": load_checkpoint: clearing the optimizer state"));
  ZDP_ASSIGN_OR_RETURN(checkpoint::FileIo io, checkpoint::FileIo::create(c.env));
  ZDP_RETURN_IF_ERROR(read_pieces(io, *opened.model, verify ? opened.model_info : nullptr,
                                  owned_pieces(c, opened.offsets.model), c.state.master(), checkpoint::ValueRule::kFinite));
  if (!full) return Status::Ok();
  const CheckpointFileInfo* entry = verify ? opened.optimizer_info : nullptr;
  const std::vector<OptimizerState::Moment> moments = c.state.moments();
  for (size_t i = 0; i < moments.size(); ++i) {
    const checkpoint::ValueRule rule = checkpoint::rule_of_tensor(moments[i].suffix);
    ZDP_RETURN_IF_ERROR(read_pieces(io, *opened.optimizer, entry, owned_pieces(c, opened.offsets.state[i]),
                                    moments[i].buffer->as<float>(), rule));
  }
  return Status::Ok();
}

// What makes two copies of a checkpoint the same one: the checksums of every file's header
// and chunks (the tensors' bytes), and the step, data position, optimizer steps and seed
// of state.json. 62 bits: its negation, for one max all-reduce of (h, -h), cannot overflow.
int64_t content_digest(const CheckpointInfo& info) {
  std::vector<uint64_t> words = {static_cast<uint64_t>(info.state.step), static_cast<uint64_t>(info.state.data_position),
                                 static_cast<uint64_t>(info.state.optimizer_steps),
                                 static_cast<uint64_t>(info.state.seed)};
  for (const CheckpointFileInfo& f : info.files) {
    words.push_back(checkpoint::hash_bytes(f.name.data(), f.name.size()));
    words.push_back(f.header_hash);
    words.insert(words.end(), f.chunk_hashes.begin(), f.chunk_hashes.end());
  }
  return static_cast<int64_t>(checkpoint::hash_bytes(words.data(), words.size() * sizeof(uint64_t)) >> 2);
}

}  // namespace

namespace checkpoint {

StatusOr<CheckpointState> load(CheckpointParts& c, Store& store, const std::string& path_or_root,
                               const LoadOptions& options, const Status& misuse) {
  const bool full = options.scope == LoadScope::kFull;
  const bool verify = options.checksums == ChecksumPolicy::kVerify;
  const std::string where = c.env.who + ": load_checkpoint from " + path_or_root;

  StatusOr<OpenedCheckpoint> opened = open_checkpoint(c, path_or_root, full, verify);
  Status open_status = misuse.ok() ? opened.status().with_context(where) : misuse;
  if (open_status.ok()) open_status = c.env.exec->synchronize(where);
  ZDP_RETURN_IF_ERROR(agree(c.env, store, "load_checkpoint: open", open_status));
  const CheckpointState& saved = opened->info.state;
  std::vector<int64_t> steps = {saved.step, -saved.step};
  ZDP_RETURN_IF_ERROR(all_reduce_i64(c.env, steps, ReduceOp::kMax, where));
  if (steps[0] != -steps[1]) {
    return Status(StatusCode::kInvalidArgument, where + ": the ranks found different checkpoints (steps " +
                                                    std::to_string(-steps[1]) + " to " + std::to_string(steps[0]) +
                                                    "; this rank " + opened->dir + "): is the directory shared, or " +
                                                    "does every node's copy hold the same checkpoints?");
  }
  // Per-node copies of one step: a node whose disk held another run's step-N (a reused
  // disk, a copy from the wrong run) passed the step check, and the job trained a mix of
  // two checkpoints without a word.
  std::vector<int64_t> digests = {content_digest(opened->info), -content_digest(opened->info)};
  ZDP_RETURN_IF_ERROR(all_reduce_i64(c.env, digests, ReduceOp::kMax, where));
  if (digests[0] != -digests[1]) {
    return Status(StatusCode::kInvalidArgument,
                  where + ": the ranks' copies of step " + std::to_string(saved.step) +
                      " differ (their checksums or state.json do; this rank read " + opened->dir +
                      "): every node must hold a copy of the same checkpoint (another run's step-" +
                      std::to_string(saved.step) + " on a node's disk, or a copy from another run?)");
  }

  // From here on the engine's state changes: a failure leaves it failed.
  Status read = read_state(c, *opened, full, verify);
  Status agreed = agree(c.env, store, "load_checkpoint: read", read.with_context(where));
  if (!agreed.ok()) return c.env.failure.fail(agreed);

  c.state.set_steps(full ? saved.optimizer_steps : 0);
  if (c.state.scaler() && full && saved.compute_dtype == to_string(DType::kF16)) {
    Status restored = c.state.scaler()->restore(saved.loss_scale, saved.loss_scale_good_steps);
    if (!restored.ok()) return c.env.failure.fail(restored.with_context(where));
  }
  CheckpointState out = saved;
  out.path = opened->dir;
  return out;
}

}  // namespace checkpoint
}  // namespace zdp
