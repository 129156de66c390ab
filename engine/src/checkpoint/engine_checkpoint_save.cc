// checkpoint::save, Engine::save_checkpoint's work: the parallel, atomic save of zdp/checkpoint.h. Phases, each
// ending in an agreement (every rank fails together, naming the rank that failed):
//   prepare   the creating rank(s) make <root>/step-N.tmp/ and both files at full size
//   write     every rank pwrite()s its ranges and fsyncs
//   checksums each rank hashes its share of the chunks, read back; one all-reduce
//   commit    the committing rank(s) write state.json, rename, update latest, prune
#include <chrono>
#include <climits>

#include "engine/src/checkpoint/engine_checkpoint.h"
#include "runtime/internal/checkpoint_dirs.h"
#include "runtime/internal/checkpoint_fault.h"
#include "runtime/internal/checkpoint_hash.h"
#include "runtime/internal/checkpoint_state.h"
#include "zdp/build_config.h"
#include "zdp/log.h"

namespace zdp {
namespace {

using checkpoint::CheckpointParts;
using checkpoint::MemBase;
using checkpoint::Piece;

// Who does what in this save.
struct SaveRoles {
  bool per_node = false;
  int node = 0;          // this rank's node
  int local = 0;         // its local rank
  int local_world = 1;   // ranks per node
  bool creator = false;  // creates the files, commits (rank 0, or local rank 0 per node)
  // Which slice index this rank writes, and which chunk it hashes: shared, rank r takes
  // r (mod K); per node, local rank l takes l (mod local_world).
  int share = 0;
  int shares = 1;
  bool mine(int64_t index) const { return index % shares == share; }
};

StatusOr<SaveRoles> save_roles(const CheckpointParts& c, CheckpointStorage storage) {
  SaveRoles r;
  if (storage == CheckpointStorage::kShared) {
    r.creator = c.env.rank == 0;
    r.share = c.env.rank;
    r.shares = c.env.world;
    return r;
  }
  const LaunchEnv& env = c.env.ctx.launch_env();
  r.per_node = true;
  r.local = env.local_rank;
  r.local_world = std::max(1, env.local_world_size);
  if (c.env.world % r.local_world != 0 || r.local >= r.local_world || c.env.rank % r.local_world != r.local) {
    return c.env.invalid("save_checkpoint: per-node storage needs nodes of LOCAL_WORLD_SIZE consecutive ranks: rank " +
                         std::to_string(c.env.rank) + ", local rank " + std::to_string(r.local) + " of " +
                         std::to_string(r.local_world) + ", world " + std::to_string(c.env.world));
  }
  r.node = c.env.rank / r.local_world;
  r.creator = r.local == 0;
  r.share = r.local;
  r.shares = r.local_world;
  return r;
}

struct SaveFiles {
  std::string model;
  std::string optimizer;
};

// Prepare: directories and both files (header + full size) by the creating rank(s).
Status create_files(const CheckpointParts& c, const std::string& root, const std::string& tmp, const SaveRoles& roles,
                    const checkpoint::FilePlan& plan, const SaveFiles& files) {
  if (!roles.creator) return Status::Ok();
  ZDP_RETURN_IF_ERROR(checkpoint::make_dirs(root));
  ZDP_RETURN_IF_ERROR(checkpoint::remove_leftovers(root));
  ZDP_RETURN_IF_ERROR(checkpoint::make_dirs(tmp));
  if (roles.per_node) {
    ZDP_RETURN_IF_ERROR(checkpoint::write_file_synced(tmp + "/node-" + std::to_string(roles.node), c.env.who + "\n"));
  }
  ZDP_ASSIGN_OR_RETURN(safetensors::Writer model, safetensors::Writer::create(files.model, plan.model));
  ZDP_RETURN_IF_ERROR(model.close());
  ZDP_ASSIGN_OR_RETURN(safetensors::Writer optimizer, safetensors::Writer::create(files.optimizer, plan.optimizer));
  return optimizer.close();
}

// Per node: another node's marker in our temporary directory means <root> is shared.
Status check_node_local(const std::string& tmp, const SaveRoles& roles, int nodes) {
  if (!roles.per_node || !roles.creator) return Status::Ok();
  for (int n = 0; n < nodes; ++n) {
    const bool seen = checkpoint::is_file(tmp + "/node-" + std::to_string(n));
    if (n != roles.node && seen) {
      return Status(StatusCode::kInvalidArgument,
                    tmp + " is shared with node " + std::to_string(n) +
                        ": per-node storage is for node-local disks; use CheckpointStorage::kShared here");
    }
    if (n == roles.node && !seen) {
      return Status(StatusCode::kInvalidArgument, tmp +
                                                      ": this node's marker file vanished (another node "
                                                      "removed it: the directory is shared between nodes); use "
                                                      "CheckpointStorage::kShared here");
    }
  }
  return Status::Ok();
}

// Write: this rank's ranges of the masters and of the optimizer state it keeps. Per node
// at stages 1-3 the ranks gather every bucket together: a rank whose files, buffer or a
// write failed still issues every gather, and its failure comes out of agree() (leaving
// the loop put it in an all-reduce while its peers gathered: a desync that hid the error,
// or a hang until the collective timeout without dp-launch).
Status write_ranges(CheckpointParts& c, Store& store, const SaveRoles& roles, const checkpoint::FilePlan& plan,
                    const SaveFiles& files, int64_t step, const std::string& where) {
  auto opened = [&](const std::string& path, const safetensors::Header& header) -> StatusOr<safetensors::Writer> {
    StatusOr<safetensors::Writer> w = safetensors::Writer::open_existing(path, header);
    if (w.status().code() == StatusCode::kNotFound && !roles.per_node) {
      return Status(StatusCode::kNotFound, w.status().message() +
                                               " (rank 0 created it: the checkpoint directory must be on a "
                                               "filesystem every rank shares; for node-local disks save with "
                                               "CheckpointStorage::kPerNode)");
    }
    return w;
  };
  StatusOr<safetensors::Writer> model = opened(files.model, plan.model);
  StatusOr<safetensors::Writer> optimizer = model.ok() ? opened(files.optimizer, plan.optimizer) : model.status();
  Status ready = optimizer.status();
  if (ready.ok()) ready = checkpoint::fault_point("create", c.env.rank, step);
  StatusOr<checkpoint::FileIo> io = ready.ok() ? checkpoint::FileIo::create(c.env) : ready;
  const bool gathers = roles.per_node && c.opt.zero.shards_optimizer();
  if (!gathers) ZDP_RETURN_IF_ERROR(io.status());

  const Layout& layout = c.layout;
  const int K = c.env.world;
  // The optimizer state this engine keeps: m and v (AdamW), m (SGD momentum) or none.
  const std::vector<OptimizerState::Moment> state = c.state.moments();
  const size_t ns = state.size();
  // `sources[0]` the masters, then one per state tensor.
  // Every value as the load will check it: a diverged run (NaN, infinity, a negative
  // second moment) is refused here, before its checkpoint is committed and the pruning
  // deletes the last one a load could take.
  auto write_slice = [&](int b, int s, MemBase base, const std::vector<const float*>& sources) -> Status {
    for (const Piece& p : checkpoint::slice_pieces(layout, b, s, base, plan.offsets.model)) {
      checkpoint::ValueCheck check(plan.model, files.model, p.file, checkpoint::ValueRule::kFinite,
                                   checkpoint::ValueCheckFor::kSave);
      ZDP_RETURN_IF_ERROR(io->write(*model, p, sources[0], check));
    }
    for (size_t i = 0; i < ns; ++i) {
      const checkpoint::ValueRule rule = checkpoint::rule_of_tensor(state[i].suffix);
      for (const Piece& p : checkpoint::slice_pieces(layout, b, s, base, plan.offsets.state[i])) {
        checkpoint::ValueCheck check(plan.optimizer, files.optimizer, p.file, rule, checkpoint::ValueCheckFor::kSave);
        ZDP_RETURN_IF_ERROR(io->write(*optimizer, p, sources[i + 1], check));
      }
    }
    return Status::Ok();
  };
  std::vector<const float*> own = {c.state.master()};
  for (const OptimizerState::Moment& t : state) own.push_back(t.buffer->as<float>());
  if (!gathers) {
    // Shared: slice `rank` of every bucket, from this rank's shard (stage 0: the full
    // state every rank holds). Per node at stage 0: the node's share of the slices.
    const MemBase base = c.opt.zero.shards_optimizer() ? MemBase::kShard : MemBase::kFlat;
    for (int b = 0; b < c.num_buckets(); ++b) {
      for (int s = 0; s < K; ++s) {
        if (roles.mine(s)) ZDP_RETURN_IF_ERROR(write_slice(b, s, base, own));
      }
    }
  } else {
    // Per node at stages 1-3: each bucket's state is gathered onto every rank (one bucket
    // at a time), and the local ranks split the writing of its slices. Every rank needs its
    // gather buffer: agreed first, as the files.
    const int64_t elems = layout.max_bucket_elems();
    const int64_t tensors = static_cast<int64_t>(own.size());
    StatusOr<DeviceBuffer> gathered =
        io.ok() ? c.env.device.allocate(tensors * elems * 4, MemCategory::kWorkspace) : io.status();
    ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: open",
                                          gathered.status().with_context(where)));
    std::vector<const float*> bucket_sources;
    for (int64_t i = 0; i < tensors; ++i) bucket_sources.push_back(gathered->as<float>() + i * elems);
    Status wrote = Status::Ok();
    for (int b = 0; b < c.num_buckets(); ++b) {
      const Bucket& bk = c.bucket(b);
      const int64_t at = layout.shard_offset(b);
      for (int64_t i = 0; i < tensors; ++i) {
        ZDP_RETURN_IF_ERROR(c.env.comm.all_gather(own[static_cast<size_t>(i)] + at, gathered->as<float>() + i * elems,
                                                  bk.slice_size(), DType::kF32, c.env.exec->comm(), b));
      }
      ZDP_RETURN_IF_ERROR(
          c.env.exec->synchronize(c.env.who + ": save_checkpoint: gather of bucket " + std::to_string(b)));
      for (int s = 0; s < K && wrote.ok(); ++s) {
        if (roles.mine(s)) wrote = write_slice(b, s, MemBase::kBucket, bucket_sources);
      }
    }
    ZDP_RETURN_IF_ERROR(wrote);
  }
  ZDP_RETURN_IF_ERROR(checkpoint::fault_point("write", c.env.rank, step));
  ZDP_RETURN_IF_ERROR(model->sync());
  ZDP_RETURN_IF_ERROR(optimizer->sync());
  ZDP_RETURN_IF_ERROR(model->close());
  return optimizer->close();
}

// Checksums: this rank's share of the chunks (and the headers), read back from disk.
// `hashes` gets two entries per hash, (h, ~h) as int64 where this rank computed it and
// INT64_MIN elsewhere, so one max all-reduce yields both the hash and (per node) whether
// all nodes agree.
Status hash_share(const SaveRoles& roles, const std::vector<std::string>& paths, int64_t chunk_bytes,
                  std::vector<CheckpointFileInfo>& infos, std::vector<int64_t>& hashes) {
  std::vector<char> buffer;
  for (const std::string& path : paths) {
    ZDP_ASSIGN_OR_RETURN(safetensors::Reader file, safetensors::Reader::open(path));
    CheckpointFileInfo info;
    info.name = path.substr(path.rfind('/') + 1);
    info.bytes = file.file_bytes();
    info.header_bytes = file.data_start();
    info.chunk_bytes = chunk_bytes;
    const int64_t chunks = checkpoint::chunk_count(file.header().data_bytes(), chunk_bytes);
    info.chunk_hashes.assign(static_cast<size_t>(chunks), 0);
    infos.push_back(info);
    auto put = [&](uint64_t h) {
      hashes.push_back(static_cast<int64_t>(h));
      hashes.push_back(static_cast<int64_t>(~h));
    };
    auto skip = [&] { hashes.insert(hashes.end(), 2, INT64_MIN); };
    if (roles.mine(0)) {
      ZDP_ASSIGN_OR_RETURN(const std::string head, file.read_header_bytes());
      put(checkpoint::hash_bytes(head.data(), head.size()));
    } else {
      skip();
    }
    for (int64_t c = 0; c < chunks; ++c) {
      if (!roles.mine(c)) {
        skip();
        continue;
      }
      ZDP_ASSIGN_OR_RETURN(const uint64_t h, checkpoint::hash_chunk(file, c, chunk_bytes, buffer));
      put(h);
    }
  }
  return Status::Ok();
}

// Every rank must save the same step with the same options (and, on a shared
// filesystem, to the same root): a rank with its own step counter would otherwise write
// another checkpoint's directory. One all-reduce of a fingerprint, max of (f, -f).
Status check_same_arguments(CheckpointParts& c, const std::string& root, const CheckpointState& state,
                            const SaveOptions& options, const std::string& where) {
  std::string key = std::to_string(state.step) + "/" + std::to_string(state.data_position) + "/" +
                    to_string(options.storage) + "/" + std::to_string(options.keep) + "/" +
                    std::to_string(options.chunk_bytes);
  if (options.storage == CheckpointStorage::kShared) key += "/" + root;
  const int64_t f = static_cast<int64_t>(checkpoint::hash_bytes(key.data(), key.size()) >> 2);  // -f is exact
  std::vector<int64_t> both = {f, -f};
  ZDP_RETURN_IF_ERROR(all_reduce_i64(c.env, both, ReduceOp::kMax, where + ": argument check"));
  if (both[0] == -both[1]) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                where + ": the ranks called save_checkpoint with different arguments (this rank: step " +
                    std::to_string(state.step) + ", data_position " + std::to_string(state.data_position) +
                    ", storage " + to_string(options.storage) + ", keep " + std::to_string(options.keep) +
                    ", chunk_bytes " + std::to_string(options.chunk_bytes) +
                    (options.storage == CheckpointStorage::kShared ? ", root " + root : std::string()) +
                    "): every rank must pass the same values");
}

// Takes the all-reduced (h, ~h) pairs of hash_share() into `infos`. A pair that is not
// (h, ~h) means two nodes computed different hashes for their copies.
Status combine_hashes(const std::vector<int64_t>& hashes, std::vector<CheckpointFileInfo>& infos) {
  size_t at = 0;
  for (CheckpointFileInfo& info : infos) {
    for (int64_t c = -1; c < static_cast<int64_t>(info.chunk_hashes.size()); ++c, at += 2) {
      const uint64_t h = static_cast<uint64_t>(hashes[at]);
      if (h != ~static_cast<uint64_t>(hashes[at + 1])) {
        return Status(StatusCode::kIoError, "the nodes' copies of " + info.name + " differ in " +
                                                (c < 0 ? "the header" : "chunk " + std::to_string(c)) +
                                                " (a disk or memory fault on some node)");
      }
      (c < 0 ? info.header_hash : info.chunk_hashes[static_cast<size_t>(c)]) = h;
    }
  }
  return Status::Ok();
}

// Commit, by the creating rank(s): state.json (the engine's fields filled in), the rename
// of step-N.tmp to step-N and `latest` (pruning to options.keep follows once every
// creator has committed).
Status commit(const CheckpointParts& c, const std::string& root, const CheckpointState& state,
              const std::string& trainer_json, const SaveOptions& options,
              const std::vector<CheckpointFileInfo>& files) {
  CheckpointInfo info;
  info.state = state;
  info.state.trainer_json = trainer_json;
  info.state.world_size = c.env.world;
  info.state.stage = c.opt.zero.stage;
  info.state.compute_dtype = to_string(c.opt.compute_dtype);
  info.state.seed = c.opt.seed;
  info.state.optimizer_steps = c.state.steps();
  info.state.loss_scale = c.state.scaler() ? c.state.scaler()->scale() : 1.0;
  info.state.loss_scale_good_steps = c.state.scaler() ? c.state.scaler()->finite_steps() : 0;
  info.state.storage = to_string(options.storage);
  info.state.library_version = ZDP_VERSION_STRING;
  info.files = files;
  info.params = static_cast<int64_t>(c.layout.params().size());
  info.elements = c.layout.payload_elems();
  const std::string tmp_name = checkpoint_dir_name(state.step) + ".tmp";
  const std::string tmp = root + "/" + tmp_name;
  ZDP_ASSIGN_OR_RETURN(const std::string text, checkpoint::encode_state(info));
  ZDP_RETURN_IF_ERROR(checkpoint::write_file_synced(tmp + "/" + kCheckpointStateFile, text));
  ZDP_RETURN_IF_ERROR(checkpoint::fault_point("commit", c.env.rank, state.step));
  ZDP_RETURN_IF_ERROR(checkpoint::sync_dir(tmp));
  ZDP_RETURN_IF_ERROR(checkpoint::commit_dir(root, tmp_name, state.step));
  ZDP_RETURN_IF_ERROR(checkpoint::fault_point("latest", c.env.rank, state.step));
  return checkpoint::write_file_atomic(root, kCheckpointLatestFile, checkpoint_dir_name(state.step) + "\n");
}

}  // namespace

namespace checkpoint {

StatusOr<std::string> save(CheckpointParts& c, Store& store, const std::string& root, const CheckpointState& state,
                           const SaveOptions& options, const Status& misuse) {
  const auto start = std::chrono::steady_clock::now();
  const std::string where = c.env.who + ": save_checkpoint of step " + std::to_string(state.step) + " to " + root;
  const std::string tmp_name = checkpoint_dir_name(state.step) + ".tmp";
  const std::string tmp = root + "/" + tmp_name;
  const SaveFiles files{tmp + "/" + kCheckpointModelFile, tmp + "/" + kCheckpointOptimizerFile};

  // Arguments, identical on every rank; checked by every rank so all agree.
  Status valid;
  if (root.empty()) valid = c.env.invalid("save_checkpoint: empty root directory");
  if (state.step < 0 || state.step > checkpoint::kMaxStep) {
    valid = c.env.invalid("save_checkpoint: step " + std::to_string(state.step) + " is not in [0, 10^18)");
  } else if (state.step < c.state.steps()) {
    // Every reader refuses such a checkpoint (check_ranges: the optimizer cannot have
    // stepped more often than the run): refused here, before a checkpoint nothing could
    // load is written.
    valid = c.env.invalid("save_checkpoint: step " + std::to_string(state.step) + " is below the " +
                          std::to_string(c.state.steps()) +
                          " optimizer steps taken: CheckpointState::step counts the run's steps (at least the "
                          "optimizer's), not epochs");
  }
  if (state.data_position < 0 || state.data_position > kMaxDataPosition) {
    // Every reader refuses past 2^62 (check_ranges), so such a save made `latest` a
    // checkpoint no resume could load.
    valid = c.env.invalid("save_checkpoint: data_position " + std::to_string(state.data_position) +
                          " is not in [0, 2^62]");
  }
  if (options.keep < 0) {
    // 0 keeps every checkpoint; a negative count (a trainer's arithmetic) did the same,
    // silently, until the disk filled.
    valid = c.env.invalid("save_checkpoint: keep " + std::to_string(options.keep) + " is negative (0 keeps all)");
  }
  if (options.chunk_bytes <= 0 || options.chunk_bytes > kMaxChecksumChunkBytes) {
    valid = c.env.invalid("save_checkpoint: chunk_bytes " + std::to_string(options.chunk_bytes) + " is not in (0, " +
                          std::to_string(kMaxChecksumChunkBytes) + "]");
  }
  StatusOr<std::string> trainer = checkpoint::normalize_trainer_json(state.trainer_json);
  if (!trainer.ok()) valid = trainer.status().with_context(c.env.who + ": save_checkpoint");
  StatusOr<SaveRoles> roles = save_roles(c, options.storage);
  if (valid.ok() && !roles.ok()) valid = roles.status();
  if (valid.ok()) valid = checkpoint::check_fault_target(c.env.rank, roles->creator);
  StatusOr<checkpoint::FilePlan> plan = checkpoint::plan_files(c);
  if (valid.ok() && !plan.ok()) valid = plan.status().with_context(where);
  if (!misuse.ok()) valid = misuse;
  if (valid.ok()) valid = c.env.exec->synchronize(where);                     // the last step's updates and gathers
  ZDP_RETURN_IF_ERROR(check_same_arguments(c, root, state, options, where));  // before any file is touched
  if (valid.ok()) valid = create_files(c, root, tmp, *roles, *plan, files).with_context(where);
  ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: prepare", valid));
  if (roles->per_node) {
    const int nodes = c.env.world / roles->local_world;
    ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: node-local check",
                                          check_node_local(tmp, *roles, nodes).with_context(where)));
    // The marker's removal is agreed too: a creator that returned here left its peers in
    // the write's gathers.
    const Status unmarked =
        roles->creator ? checkpoint::remove_tree(tmp + "/node-" + std::to_string(roles->node)) : Status::Ok();
    ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: node marker", unmarked.with_context(where)));
  }

  Status wrote = write_ranges(c, store, *roles, *plan, files, state.step, where);
  ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: write", wrote.with_context(where)));

  std::vector<CheckpointFileInfo> infos;
  std::vector<int64_t> hashes;
  Status hashed = hash_share(*roles, {files.model, files.optimizer}, options.chunk_bytes, infos, hashes);
  ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: checksums", hashed.with_context(where)));
  ZDP_RETURN_IF_ERROR(all_reduce_i64(c.env, hashes, ReduceOp::kMax, where + ": checksums"));
  ZDP_RETURN_IF_ERROR(combine_hashes(hashes, infos).with_context(where));
  ZDP_RETURN_IF_ERROR(checkpoint::fault_point("checksum", c.env.rank, state.step));

  const Status committed = roles->creator ? commit(c, root, state, *trainer, options, infos) : Status::Ok();
  ZDP_RETURN_IF_ERROR(checkpoint::agree(c.env, store, "save_checkpoint: commit", committed.with_context(where)));
  // Pruning only once every creator has committed: with per-node storage, a node that
  // pruned while another failed its commit kept only the new step, the other only the
  // old one, and no step was left that every node had (keep_last = 1 could not resume).
  // A failed prune is a warning: the step is committed and `latest` names it (NFS keeps a
  // folder whose file another process holds open: .nfsXXXX; that stopped the job).
  const Status pruned = roles->creator ? checkpoint::prune(root, options.keep, state.step) : Status::Ok();
  if (!pruned.ok()) {
    ZDP_LOG(kWarn) << where << ": saved, but older checkpoints beyond keep_last = " << options.keep
                   << " stay: " << pruned.to_string();
  }
  const std::string final_path = root + "/" + checkpoint_dir_name(state.step);
  if (c.env.rank == 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t bytes = 0;
    for (const CheckpointFileInfo& info : infos) bytes += info.bytes;
    ZDP_LOG(kInfo) << "checkpoint: saved step " << state.step << " to " << final_path << " (" << format_bytes(bytes)
                   << ", " << c.env.world << " ranks, " << to_string(options.storage) << ") in " << seconds << " s";
  }
  return final_path;
}

}  // namespace checkpoint
}  // namespace zdp
