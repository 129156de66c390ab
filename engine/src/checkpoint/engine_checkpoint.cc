// The pieces Engine::save_checkpoint and load_checkpoint share (engine_checkpoint.h).
#include "engine/src/checkpoint/engine_checkpoint.h"

#include <algorithm>

#include "core/internal/printable.h"
#include "engine/src/buffer_plan.h"
#include "zdp/build_config.h"
#include "zdp/log.h"

namespace zdp::checkpoint {
namespace {

// The CUDA staging buffer: large enough for disk-speed transfers, small beside a model.
constexpr int64_t kStagingBytes = int64_t{8} << 20;

std::string shape_or_dtype(const safetensors::TensorInfo& t) { return printable(t.dtype, 16) + " " + format_shape(t.shape); }

// Finds the tensor `name` (an engine parameter's name plus `suffix`) in `file` and
// checks it is F32 of the parameter's shape.
StatusOr<int64_t> tensor_offset(const CheckpointParts& c, const safetensors::Reader& file, int p,
                                const std::string& suffix) {
  const ParamPlacement& pl = c.placement(p);
  const std::string name = pl.name + suffix;
  const int t = file.find(name);
  const std::string model_side =
      "the model's parameter #" + std::to_string(p) + " '" + pl.name + "' is F32 " + format_shape(pl.shape);
  if (t < 0) {
    return Status(StatusCode::kInvalidArgument,
                  file.path() + " holds no tensor '" + name + "' (" + model_side + "): a checkpoint of another model");
  }
  const safetensors::TensorInfo& info = file.header().tensors[static_cast<size_t>(t)];
  if (info.dtype != "F32" || info.shape != pl.shape) {
    return Status(StatusCode::kInvalidArgument, file.path() + ": tensor '" + name + "' is " + shape_or_dtype(info) +
                                                    ", but " + model_side + ": a checkpoint of another model");
  }
  return info.begin;
}

// A tensor of `file` that no parameter (with `suffixes`) accounts for.
Status check_no_extra(const CheckpointParts& c, const safetensors::Reader& file,
                      const std::vector<std::string>& suffixes) {
  const size_t expected = c.layout.params().size() * suffixes.size();
  if (file.header().tensors.size() == expected) return Status::Ok();
  for (const safetensors::TensorInfo& t : file.header().tensors) {
    bool known = false;
    for (const std::string& suffix : suffixes) {
      if (t.name.size() < suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      if (c.layout.find(t.name.substr(0, t.name.size() - suffix.size())).ok()) known = true;
    }
    if (!known) {
      return Status(StatusCode::kInvalidArgument, file.path() + " holds tensor '" + printable(t.name) + "' " + shape_or_dtype(t) +
                                                      ", which the model does not have: a checkpoint of another model");
    }
  }
  return Status(StatusCode::kInvalidArgument, file.path() + ": " + std::to_string(file.header().tensors.size()) +
                                                  " tensors where the model needs " + std::to_string(expected));
}

// Which optimizer's state a file holds (or the engine keeps): told apart by tensor names.
enum class StateKind { kAdamW, kSgdMomentum, kSgdPlain, kOther };

StateKind configured_kind(const OptimConfig& o) {
  if (o.name == OptimizerKind::kAdamW) return StateKind::kAdamW;
  return o.beta1 != 0.0 ? StateKind::kSgdMomentum : StateKind::kSgdPlain;
}

// From the tensors stored for parameter `name` (kOther: none of the sets, another model).
StateKind saved_kind(const safetensors::Reader& file, const std::string& name) {
  auto has = [&](const char* suffix) { return file.find(name + suffix) >= 0; };
  if (has(kExpAvgSuffix) && has(kExpAvgSqSuffix)) return StateKind::kAdamW;
  if (has(kMomentumBufferSuffix)) return StateKind::kSgdMomentum;
  if (file.header().tensors.empty()) return StateKind::kSgdPlain;
  return StateKind::kOther;
}

std::string describe(StateKind kind) {
  switch (kind) {
    case StateKind::kAdamW: return "adamw (exp_avg and exp_avg_sq per parameter)";
    case StateKind::kSgdMomentum: return "sgd with momentum (momentum_buffer per parameter)";
    case StateKind::kSgdPlain: return "sgd without momentum (no tensors)";
    default: return "another optimizer";
  }
}

}  // namespace

StatusOr<FilePlan> plan_files(const CheckpointParts& c) {
  std::vector<safetensors::TensorSpec> model, optimizer;
  for (const ParamPlacement& pl : c.layout.params()) model.push_back({pl.name, "F32", pl.shape});
  const std::vector<const char*> suffixes = c.state.moment_suffixes();
  for (const char* suffix : suffixes) {
    for (const ParamPlacement& pl : c.layout.params()) optimizer.push_back({pl.name + suffix, "F32", pl.shape});
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"producer", std::string("zdp ") + ZDP_VERSION_STRING}};
  FilePlan plan;
  ZDP_ASSIGN_OR_RETURN(plan.model, safetensors::make_header(model, meta));
  ZDP_ASSIGN_OR_RETURN(plan.optimizer, safetensors::make_header(optimizer, meta));
  const size_t n = c.layout.params().size();
  plan.offsets.state.resize(suffixes.size());
  for (size_t p = 0; p < n; ++p) {
    plan.offsets.model.push_back(plan.model.tensors[p].begin);
    for (size_t i = 0; i < suffixes.size(); ++i) {
      plan.offsets.state[i].push_back(plan.optimizer.tensors[i * n + p].begin);
    }
  }
  return plan;
}

StatusOr<FileOffsets> match_files(const CheckpointParts& c, const safetensors::Reader& model,
                                  const safetensors::Reader* optimizer) {
  FileOffsets out;
  const int n = static_cast<int>(c.layout.params().size());
  for (int p = 0; p < n; ++p) {
    ZDP_ASSIGN_OR_RETURN(const int64_t at, tensor_offset(c, model, p, ""));
    out.model.push_back(at);
  }
  ZDP_RETURN_IF_ERROR(check_no_extra(c, model, {""}));
  if (optimizer == nullptr) return out;
  const std::vector<const char*> suffixes = c.state.moment_suffixes();
  if (n > 0) {
    // Another optimizer's state: refused as such rather than as a missing tensor.
    const StateKind saved = saved_kind(*optimizer, c.placement(0).name);
    const StateKind configured = configured_kind(c.opt.optim);
    if (saved != StateKind::kOther && saved != configured) {
      return Status(StatusCode::kInvalidArgument,
                    optimizer->path() + " holds the state of " + describe(saved) +
                        ", but the configured optimizer is " + describe(configured) +
                        ": configure the optimizer it was saved with, or load weights only "
                        "(LoadScope::kWeightsOnly) to start the optimizer afresh");
    }
  }
  out.state.resize(suffixes.size());
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < suffixes.size(); ++i) {
      ZDP_ASSIGN_OR_RETURN(const int64_t at, tensor_offset(c, *optimizer, p, suffixes[i]));
      out.state[i].push_back(at);
    }
  }
  ZDP_RETURN_IF_ERROR(check_no_extra(c, *optimizer, std::vector<std::string>(suffixes.begin(), suffixes.end())));
  return out;
}

std::vector<Piece> slice_pieces(const Layout& layout, int bucket, int slice, MemBase base,
                                const std::vector<int64_t>& tensor_offsets) {
  std::vector<Piece> out;
  const int64_t bucket_begin = layout.buckets()[static_cast<size_t>(bucket)].begin;
  for (const Segment& s : layout.segments_in_slice(bucket, slice)) {
    Piece piece;
    piece.file = tensor_offsets[static_cast<size_t>(s.param)] + s.param_offset * 4;
    piece.mem = base == MemBase::kFlat    ? s.flat_offset
                : base == MemBase::kShard ? s.shard_offset
                                          : s.flat_offset - bucket_begin;
    piece.count = s.length;
    if (!out.empty()) {
      Piece& last = out.back();
      if (last.file + last.count * 4 == piece.file && last.mem + last.count == piece.mem) {
        last.count += piece.count;
        continue;
      }
    }
    out.push_back(piece);
  }
  return out;
}

StatusOr<FileIo> FileIo::create(EngineEnv& env) {
  FileIo io(env);
  if (env.device.kind() != DeviceKind::kCpu) {
    ZDP_ASSIGN_OR_RETURN(io.staging_,
                         env.device.allocate(kStagingBytes, MemCategory::kWorkspace, MemSpace::kPinnedHost));
  }
  return io;
}

Status FileIo::write(safetensors::Writer& file, const Piece& piece, const float* base, ValueCheck& check) {
  const float* src = base + piece.mem;
  if (env_->device.kind() == DeviceKind::kCpu) {
    ZDP_RETURN_IF_ERROR(check.feed(reinterpret_cast<const char*>(src), piece.count * 4));
    return file.write(piece.file, src, piece.count * 4);
  }
  const int64_t bytes = piece.count * 4;
  for (int64_t done = 0; done < bytes; done += kStagingBytes) {
    const int64_t n = std::min(kStagingBytes, bytes - done);
    ZDP_RETURN_IF_ERROR(
        env_->device.memcpy(staging_.data(), reinterpret_cast<const char*>(src) + done, static_cast<size_t>(n)));
    ZDP_RETURN_IF_ERROR(check.feed(static_cast<const char*>(staging_.data()), n));
    ZDP_RETURN_IF_ERROR(file.write(piece.file + done, staging_.data(), n));
  }
  return Status::Ok();
}

Status FileIo::read(const safetensors::Reader& file, int64_t offset, int64_t bytes, void* dst, ValueCheck& check) {
  if (env_->device.kind() == DeviceKind::kCpu) {
    ZDP_RETURN_IF_ERROR(file.read(offset, dst, bytes));
    return check.feed(static_cast<const char*>(dst), bytes);
  }
  for (int64_t done = 0; done < bytes; done += kStagingBytes) {
    const int64_t n = std::min(kStagingBytes, bytes - done);
    ZDP_RETURN_IF_ERROR(file.read(offset + done, staging_.data(), n));
    ZDP_RETURN_IF_ERROR(check.feed(static_cast<const char*>(staging_.data()), n));
    ZDP_RETURN_IF_ERROR(env_->device.memcpy(static_cast<char*>(dst) + done, staging_.data(), static_cast<size_t>(n)));
  }
  return Status::Ok();
}

Status FileIo::to_device(void* dst, const void* src, int64_t bytes) {
  return env_->device.memcpy(dst, src, static_cast<size_t>(bytes));
}

Status agree(EngineEnv& env, Store& store, const std::string& phase, const Status& mine) {
  if (!mine.ok()) {
    // Set before the all-reduce, so whoever learns of the failure finds the message.
    Status s = store.set("failed/" + phase + "/" + std::to_string(env.rank), mine.to_string());
    if (!s.ok()) ZDP_LOG(kWarn) << env.who << ": " << phase << ": could not publish the failure: " << s.to_string();
  }
  std::vector<int64_t> failed(static_cast<size_t>(env.world), 0);
  failed[static_cast<size_t>(env.rank)] = mine.ok() ? 0 : 1;
  Status reduced = all_reduce_i64(env, failed, ReduceOp::kSum, phase);
  if (!mine.ok()) return mine;
  if (!reduced.ok()) return reduced;  // names the rank and the phase already
  for (int q = 0; q < env.world; ++q) {
    if (failed[static_cast<size_t>(q)] == 0) continue;
    StatusOr<std::string> why = store.get("failed/" + phase + "/" + std::to_string(q), env.timeout);
    return Status(StatusCode::kAborted,
                  env.who + ": " + phase + ": rank " + std::to_string(q) +
                      " failed: " + (why.ok() ? *why : "(its message is lost: " + why.status().message() + ")"));
  }
  return Status::Ok();
}

}  // namespace zdp::checkpoint
