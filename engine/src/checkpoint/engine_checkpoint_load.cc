// Engine::load_checkpoint: restores a checkpoint saved at any world size and stage
// (zdp/checkpoint.h). Phases, each ending in an agreement across ranks:
//   open     resolve the directory, read state.json, open the files, check sizes, the
//            header checksums and every tensor name and shape (nothing changed yet)
//   read     each rank reads the byte ranges of its own slices, whole chunks at a time,
//            verifying each chunk's checksum before using a byte of it
//   restore  step count and loss scale; the compute-dtype parameters recomputed from
//            the masters and all-gathered, as after an optimizer step
#include <algorithm>
#include <chrono>
#include <optional>

#include "runtime/internal/checkpoint_hash.h"
#include "engine/src/checkpoint/engine_checkpoint.h"
#include "zdp/log.h"

namespace zdp {
namespace {

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

StatusOr<OpenedCheckpoint> open_checkpoint(const Engine::Impl& m, const std::string& path_or_root, bool full,
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
  ZDP_ASSIGN_OR_RETURN(c.offsets, checkpoint::match_files(m, *c.model, full ? &*c.optimizer : nullptr));
  return c;
}

// Reads `pieces` (ascending file offsets) of `file` into `base` (device memory). With
// `entry`, whole chunks are read and verified before any of their bytes is used.
Status read_pieces(checkpoint::FileIo& io, const safetensors::Reader& file, const CheckpointFileInfo* entry,
                   const std::vector<Piece>& pieces, float* base) {
  std::vector<char> chunk;
  int64_t cached = -1;
  checkpoint::ChunkRange range;
  for (const Piece& p : pieces) {
    const int64_t begin = p.file, end = p.file + p.count * 4;
    char* dst = reinterpret_cast<char*>(base + p.mem);
    if (entry == nullptr) {
      ZDP_RETURN_IF_ERROR(io.read(file, begin, end - begin, dst));
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
      ZDP_RETURN_IF_ERROR(io.to_device(dst + (lo - begin), chunk.data() + (lo - range.begin), hi - lo));
    }
  }
  return Status::Ok();
}

// This rank's pieces of one tensor set: its slice of every bucket (all of them at stage
// 0, where every rank holds the whole state), ascending in the file.
std::vector<Piece> owned_pieces(const Engine::Impl& m, const std::vector<int64_t>& offsets) {
  std::vector<Piece> out;
  for (int b = 0; b < m.num_buckets(); ++b) {
    for (int s = 0; s < m.world; ++s) {
      if (m.opt.stage != 0 && s != m.rank) continue;
      const MemBase base = m.opt.stage == 0 ? MemBase::kFlat : MemBase::kShard;
      for (const Piece& p : checkpoint::slice_pieces(m.layout, b, s, base, offsets)) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end(), [](const Piece& a, const Piece& b) { return a.file < b.file; });
  return out;
}

Status read_state(Engine::Impl& m, const OpenedCheckpoint& c, bool full, bool verify) {
  // Padding stays zero; weights-only leaves the optimizer state (m, v: what it keeps) zero.
  for (DeviceBuffer* b : {&m.master, &m.exp_avg, &m.exp_avg_sq}) {
    if (!b->empty()) ZDP_RETURN_IF_ERROR(m.exec->memset(b->data(), 0, b->bytes()));
  }
  ZDP_RETURN_IF_ERROR(m.exec->synchronize(m.who + ": load_checkpoint: clearing the optimizer state"));
  ZDP_ASSIGN_OR_RETURN(checkpoint::FileIo io, checkpoint::FileIo::create(m));
  ZDP_RETURN_IF_ERROR(read_pieces(io, *c.model, verify ? c.model_info : nullptr, owned_pieces(m, c.offsets.model),
                                  m.master.as<float>()));
  if (!full) return Status::Ok();
  const CheckpointFileInfo* entry = verify ? c.optimizer_info : nullptr;
  const std::vector<checkpoint::StateTensor> state = checkpoint::state_tensors(m);
  for (size_t i = 0; i < state.size(); ++i) {
    ZDP_RETURN_IF_ERROR(read_pieces(io, *c.optimizer, entry, owned_pieces(m, c.offsets.state[i]),
                                    state[i].buffer->as<float>()));
  }
  return Status::Ok();
}

// The compute-dtype parameters from the masters, as the end of step() leaves them.
Status recompute_params(Engine::Impl& m, const std::string& where) {
  for (int b = 0; b < m.num_buckets(); ++b) {
    const OwnedRange o = m.owned(b);
    void* dst = m.opt.stage < 3 ? elem_ptr(m.params_full.data(), o.flat, m.cdt())
                                : elem_ptr(m.params_shard.data(), o.state, m.cdt());
    ZDP_RETURN_IF_ERROR(
        m.exec->cast(kernels::CastArgs{m.master.as<float>() + o.state, DType::kF32, dst, m.cdt(), o.count}));
    if (m.opt.stage == 1 || m.opt.stage == 2) {
      ZDP_RETURN_IF_ERROR(m.exec->comm_after_compute());
      ZDP_RETURN_IF_ERROR(m.comm.all_gather(dst, elem_ptr(m.params_full.data(), m.bucket(b).begin, m.cdt()), o.count,
                                            m.cdt(), m.exec->comm(), b));
    }
  }
  ZDP_RETURN_IF_ERROR(m.exec->synchronize(where + ": parameter all-gather"));
  for (BucketState& st : m.buckets) st.gather_pending = false;
  if (m.opt.stage == 3) m.invalidate_gathered();
  return Status::Ok();
}

}  // namespace

StatusOr<CheckpointState> Engine::load_checkpoint(const std::string& path_or_root, const LoadOptions& options) {
  Impl& m = *impl_;
  ZDP_RETURN_IF_ERROR(checkpoint::require_between_steps(m, "load_checkpoint"));
  const auto start = std::chrono::steady_clock::now();
  const bool full = options.scope == LoadScope::kFull;
  const bool verify = options.checksums == ChecksumPolicy::kVerify;
  const std::string where = m.who + ": load_checkpoint from " + path_or_root;
  PrefixStore store(checkpoint::next_op_prefix(m, "load"), m.ctx.store());

  StatusOr<OpenedCheckpoint> opened = open_checkpoint(m, path_or_root, full, verify);
  Status open_status = opened.status().with_context(where);
  if (open_status.ok()) open_status = m.exec->synchronize(where);
  ZDP_RETURN_IF_ERROR(checkpoint::agree(m, store, "load_checkpoint: open", open_status));
  const CheckpointState& saved = opened->info.state;
  std::vector<int64_t> steps = {saved.step, -saved.step};
  ZDP_RETURN_IF_ERROR(checkpoint::all_reduce_i64(m, steps, ReduceOp::kMax, where));
  if (steps[0] != -steps[1]) {
    return Status(StatusCode::kInvalidArgument, where + ": the ranks found different checkpoints (steps " +
                                                    std::to_string(-steps[1]) + " to " + std::to_string(steps[0]) +
                                                    "; this rank " + opened->dir + "): is the directory shared, or " +
                                                    "does every node's copy hold the same checkpoints?");
  }

  // From here on the engine's state changes: a failure leaves it failed.
  Status read = read_state(m, *opened, full, verify);
  Status agreed = checkpoint::agree(m, store, "load_checkpoint: read", read.with_context(where));
  if (!agreed.ok()) return m.fail(agreed);

  m.steps = full ? saved.optimizer_steps : 0;
  if (m.scaler && full && saved.compute_dtype == to_string(DType::kF16)) {
    Status restored = m.scaler->restore(saved.loss_scale, saved.loss_scale_good_steps);
    if (!restored.ok()) return m.fail(restored.with_context(where));
  }
  ZDP_RETURN_IF_ERROR(m.fail(recompute_params(m, where)));
  m.reset_step_state();

  CheckpointState out = saved;
  out.path = opened->dir;
  if (m.rank == 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ZDP_LOG(kInfo) << "checkpoint: loaded step " << saved.step << " from " << out.path << " (saved by "
                   << saved.world_size << " ranks at stage " << saved.stage << ", " << saved.compute_dtype << "; now "
                   << m.world << " ranks at stage " << m.opt.stage << ", " << to_string(m.cdt())
                   << (full ? "" : "; weights only") << (verify ? "" : "; checksums skipped") << ") in " << seconds
                   << " s";
  }
  return out;
}

}  // namespace zdp
