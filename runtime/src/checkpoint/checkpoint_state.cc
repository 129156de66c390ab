// state.json encoding and decoding (checkpoint_state.h), and read_checkpoint_info().
#include "runtime/internal/checkpoint_state.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/internal/input_file.h"
#include "core/internal/printable.h"
#include "runtime/internal/checkpoint_dirs.h"
#include "runtime/internal/checkpoint_hash.h"
#include "runtime/internal/json_checked.h"
#include "zdp/build_config.h"

namespace zdp {

const char* to_string(CheckpointStorage storage) {
  return storage == CheckpointStorage::kPerNode ? "per-node" : "shared";
}

std::string checkpoint_dir_name(int64_t step) { return "step-" + std::to_string(step); }

namespace checkpoint {
namespace {

using json = nlohmann::ordered_json;
constexpr const char* kFormatName = "zdp-checkpoint";
constexpr const char* kHashName = "xxh3-64";
// A checkpoint file's sizes are at most 4 EiB, so chunk_count's sum cannot overflow.
constexpr int64_t kMaxFileBytes = int64_t{1} << 62;

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Field access that names the field (dotted path) when it is missing or of another type.
class Fields {
 public:
  Fields(const json& j, std::string where, std::string prefix = "")
      : j_(j), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const json* find(const std::string& key) const {
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  Status missing(const std::string& key, const char* what) const {
    return Status(StatusCode::kInvalidArgument, where_ + ": field '" + prefix_ + key + "' is missing or not " + what);
  }
  // An integer in [lo, hi]: the bounds keep a later narrowing to int (world_size) or sum
  // of sizes (chunk_count) defined; check_ranges() then refuses, all at once, what no save
  // writes.
  StatusOr<int64_t> integer(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const {
    return json_checked::with_context(json_checked::integer(find(key), "field '" + prefix_ + key + "'", lo, hi), where_);
  }
  StatusOr<double> number(const std::string& key) const {
    return json_checked::with_context(json_checked::finite_number(find(key), "field '" + prefix_ + key + "'"), where_);
  }
  StatusOr<std::string> string(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr || !v->is_string()) return missing(key, "a string");
    return v->get<std::string>();
  }
  StatusOr<const json*> object(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr || !v->is_object()) return missing(key, "an object");
    return v;
  }
  StatusOr<const json*> array(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr || !v->is_array()) return missing(key, "an array");
    return v;
  }
  const std::string& where() const { return where_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const json& j_;
  std::string where_;
  std::string prefix_;
};

StatusOr<CheckpointFileInfo> decode_file(const json& j, const std::string& where, size_t index) {
  const std::string prefix = "files[" + std::to_string(index) + "].";
  if (!j.is_object()) return Status(StatusCode::kInvalidArgument, where + ": '" + prefix + "' is not an object");
  Fields f(j, where, prefix);
  CheckpointFileInfo file;
  ZDP_ASSIGN_OR_RETURN(file.name, f.string("name"));
  // The name is joined to the checkpoint's folder and opened: only the files a checkpoint
  // has ("../../etc/passwd" was opened by verify).
  if (file.name != kCheckpointModelFile && file.name != kCheckpointOptimizerFile) {
    return Status(StatusCode::kInvalidArgument, where + ": '" + prefix + "name' = '" + printable(file.name, 64) +
                                                    "' is not " + kCheckpointModelFile + " or " + kCheckpointOptimizerFile);
  }
  ZDP_ASSIGN_OR_RETURN(file.bytes, f.integer("bytes", INT64_MIN, kMaxFileBytes));
  ZDP_ASSIGN_OR_RETURN(file.header_bytes, f.integer("header_bytes", INT64_MIN, kMaxFileBytes));
  ZDP_ASSIGN_OR_RETURN(file.chunk_bytes, f.integer("chunk_bytes", INT64_MIN, kMaxFileBytes));
  if (file.chunk_bytes <= 0 || file.chunk_bytes > kMaxChecksumChunkBytes || file.header_bytes < 8 ||
      file.bytes < file.header_bytes) {
    return Status(StatusCode::kInvalidArgument, where + ": '" + prefix + "': inconsistent sizes (bytes " +
                                                    std::to_string(file.bytes) + ", header_bytes " +
                                                    std::to_string(file.header_bytes) + ", chunk_bytes " +
                                                    std::to_string(file.chunk_bytes) + ")");
  }
  ZDP_ASSIGN_OR_RETURN(const std::string header_hash, f.string("header_hash"));
  ZDP_ASSIGN_OR_RETURN(file.header_hash, parse_hash_hex(header_hash, where + ": " + prefix + "header_hash"));
  ZDP_ASSIGN_OR_RETURN(const json* chunks, f.array("chunks"));
  const int64_t expect = chunk_count(file.bytes - file.header_bytes, file.chunk_bytes);
  if (static_cast<int64_t>(chunks->size()) != expect) {
    return Status(StatusCode::kInvalidArgument, where + ": '" + prefix + "chunks' lists " +
                                                    std::to_string(chunks->size()) + " checksums, the sizes need " +
                                                    std::to_string(expect));
  }
  for (size_t i = 0; i < chunks->size(); ++i) {
    const json& c = (*chunks)[i];
    const std::string at = where + ": " + prefix + "chunks[" + std::to_string(i) + "]";
    if (!c.is_string()) return Status(StatusCode::kInvalidArgument, at + " is not a string");
    ZDP_ASSIGN_OR_RETURN(const uint64_t h, parse_hash_hex(c.get<std::string>(), at));
    file.chunk_hashes.push_back(h);
  }
  return file;
}

constexpr size_t kMaxFiles = 16;

uint64_t hash_text(const std::string& text) { return hash_bytes(text.data(), text.size()); }

// state_checksum is the hash of the file's content without it, as encode_state() formed it.
Status check_state_checksum(json j, const std::string& where) {
  const auto it = j.find("state_checksum");
  if (it == j.end() || !it->is_string()) {
    return Status(StatusCode::kInvalidArgument, where + ": field 'state_checksum' is missing or not a string");
  }
  ZDP_ASSIGN_OR_RETURN(const uint64_t expected, parse_hash_hex(it->get<std::string>(), where + ": state_checksum"));
  j.erase(it);
  const uint64_t got = hash_text(j.dump());
  if (got != expected) {
    return Status(StatusCode::kIoError, where + ": the content has checksum " + hash_hex(got) +
                                            ", its state_checksum says " + hash_hex(expected) +
                                            " (the file was altered or damaged)");
  }
  return Status::Ok();
}

// Every field in the range a save can produce, so that a damaged or hand-edited state.json
// is refused naming the field instead of steering a resume (a step, a data position or a
// world size no run can have).
Status check_ranges(const CheckpointInfo& info, const std::string& where) {
  const CheckpointState& s = info.state;
  std::string bad;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) bad += (bad.empty() ? "" : "; ") + what;
  };
  check(s.step >= 0 && s.step <= kMaxStep, "step " + std::to_string(s.step) + " is not in [0, 10^18)");
  check(s.data_position >= 0 && s.data_position <= kMaxDataPosition,
        "data_position " + std::to_string(s.data_position) + " is not in [0, 2^62]");
  check(s.world_size >= 1 && s.world_size <= (1 << 24), "engine.world_size " + std::to_string(s.world_size) +
                                                            " is not in [1, 2^24]");
  check(s.stage >= 0 && s.stage <= 3, "engine.stage " + std::to_string(s.stage) + " is not 0, 1, 2 or 3");
  check(s.compute_dtype == "fp32" || s.compute_dtype == "bf16" || s.compute_dtype == "fp16",
        "engine.compute_dtype '" + s.compute_dtype + "' is not fp32, bf16 or fp16");
  check(s.optimizer_steps >= 0 && s.optimizer_steps <= s.step,
        "engine.optimizer_steps " + std::to_string(s.optimizer_steps) + " is not in [0, step " +
            std::to_string(s.step) + "]");
  check(std::isfinite(s.loss_scale) && s.loss_scale > 0, "engine.loss_scale.scale is not finite and > 0");
  check(s.loss_scale_good_steps >= 0, "engine.loss_scale.finite_steps is negative");
  check(info.params >= 0 && info.elements >= info.params,
        "engine.params " + std::to_string(info.params) + " and engine.elements " + std::to_string(info.elements) +
            " are inconsistent");
  check(s.storage == "shared" || s.storage == "per-node", "storage '" + s.storage + "' is not shared or per-node");
  if (bad.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, where + ": " + bad);
}

}  // namespace

StatusOr<std::string> normalize_trainer_json(const std::string& trainer_json) {
  if (trainer_json.empty()) return std::string("{}");
  json j = json_checked::parse<json>(trainer_json);
  if (j.is_discarded()) {
    return Status(StatusCode::kInvalidArgument,
                  "CheckpointState::trainer_json does not parse as JSON: '" + trainer_json.substr(0, 80) + "'");
  }
  return j.dump();
}

StatusOr<std::string> encode_state(const CheckpointInfo& info) {
  const CheckpointState& s = info.state;
  ZDP_ASSIGN_OR_RETURN(const std::string trainer, normalize_trainer_json(s.trainer_json));
  json j;
  j["format"] = kFormatName;
  j["format_version"] = kCheckpointFormatVersion;
  j["step"] = s.step;
  j["data_position"] = s.data_position;
  j["trainer"] = json::parse(trainer);
  j["engine"] = json{{"world_size", s.world_size},
                     {"stage", s.stage},
                     {"compute_dtype", s.compute_dtype},
                     {"seed", s.seed},
                     {"optimizer_steps", s.optimizer_steps},
                     {"loss_scale", json{{"scale", s.loss_scale}, {"finite_steps", s.loss_scale_good_steps}}},
                     {"params", info.params},
                     {"elements", info.elements}};
  j["storage"] = s.storage;
  j["library_version"] = s.library_version.empty() ? std::string(ZDP_VERSION_STRING) : s.library_version;
  j["saved_at"] = utc_now();
  j["checksum"] = kHashName;
  json files = json::array();
  for (const CheckpointFileInfo& f : info.files) {
    json chunks = json::array();
    for (uint64_t h : f.chunk_hashes) chunks.push_back(hash_hex(h));
    files.push_back(json{{"name", f.name},
                         {"bytes", f.bytes},
                         {"header_bytes", f.header_bytes},
                         {"chunk_bytes", f.chunk_bytes},
                         {"header_hash", hash_hex(f.header_hash)},
                         {"chunks", chunks}});
  }
  j["files"] = files;
  // Last, over everything above: a flipped bit anywhere in the file (the step, the data
  // position, a chunk checksum) is found before any field is used.
  j["state_checksum"] = hash_hex(hash_text(j.dump()));
  std::string text = j.dump(1) + "\n";
  // What read_small_file() reads back: a larger one saved and never loaded (a trainer
  // state of that size, or some 10 TiB of tensors in 4 MiB chunks).
  if (static_cast<int64_t>(text.size()) > kMaxSmallFileBytes) {
    return Status(StatusCode::kInvalidArgument,
                  "state.json would be " + std::to_string(text.size()) + " bytes, more than the " +
                      std::to_string(kMaxSmallFileBytes) + " a load reads (trainer state " +
                      std::to_string(trainer.size()) + " bytes; raise SaveOptions::chunk_bytes for fewer checksums)");
  }
  return text;
}

StatusOr<CheckpointInfo> decode_state(const std::string& text, const std::string& where) {
  json j = json_checked::parse<json>(text);
  if (j.is_discarded() || !j.is_object()) {
    return Status(StatusCode::kInvalidArgument, where + ": not a JSON object (damaged, nested deeper than " +
                                                    std::to_string(json_checked::kMaxNesting) + " levels, or not a zdp state.json)");
  }
  Fields f(j, where);
  ZDP_ASSIGN_OR_RETURN(const std::string format, f.string("format"));
  if (format != kFormatName) {
    return Status(StatusCode::kInvalidArgument, where + ": format '" + printable(format, 64) + "' is not " + kFormatName);
  }
  ZDP_ASSIGN_OR_RETURN(const int64_t version, f.integer("format_version"));
  if (version != 1 && version != kCheckpointFormatVersion) {
    return Status(StatusCode::kInvalidArgument, where + ": format_version " + std::to_string(version) +
                                                    " (this build reads versions 1 to " +
                                                    std::to_string(kCheckpointFormatVersion) + ")");
  }
  // Version 1 had no state_checksum; one that carries one was written as version 2 and
  // edited (a changed version digit turned off the only check of step and data_position).
  if (version >= 2 || j.contains("state_checksum")) ZDP_RETURN_IF_ERROR(check_state_checksum(j, where));
  ZDP_ASSIGN_OR_RETURN(const std::string hash, f.string("checksum"));
  if (hash != kHashName) {
    return Status(StatusCode::kInvalidArgument, where + ": checksum '" + hash + "' is not " + kHashName);
  }
  CheckpointInfo info;
  CheckpointState& s = info.state;
  ZDP_ASSIGN_OR_RETURN(s.step, f.integer("step"));
  ZDP_ASSIGN_OR_RETURN(s.data_position, f.integer("data_position"));
  const json* trainer = f.find("trainer");
  s.trainer_json = trainer == nullptr ? "{}" : trainer->dump();
  ZDP_ASSIGN_OR_RETURN(s.storage, f.string("storage"));
  ZDP_ASSIGN_OR_RETURN(s.library_version, f.string("library_version"));
  ZDP_ASSIGN_OR_RETURN(const json* engine, f.object("engine"));
  Fields e(*engine, where, "engine.");
  ZDP_ASSIGN_OR_RETURN(const int64_t world, e.integer("world_size", INT_MIN, INT_MAX));
  ZDP_ASSIGN_OR_RETURN(const int64_t stage, e.integer("stage", INT_MIN, INT_MAX));
  s.world_size = static_cast<int>(world);
  s.stage = static_cast<int>(stage);
  ZDP_ASSIGN_OR_RETURN(s.compute_dtype, e.string("compute_dtype"));
  ZDP_ASSIGN_OR_RETURN(s.seed, e.integer("seed"));
  ZDP_ASSIGN_OR_RETURN(s.optimizer_steps, e.integer("optimizer_steps"));
  ZDP_ASSIGN_OR_RETURN(info.params, e.integer("params"));
  ZDP_ASSIGN_OR_RETURN(info.elements, e.integer("elements"));
  ZDP_ASSIGN_OR_RETURN(const json* scale, e.object("loss_scale"));
  Fields ls(*scale, where, "engine.loss_scale.");
  ZDP_ASSIGN_OR_RETURN(s.loss_scale, ls.number("scale"));
  ZDP_ASSIGN_OR_RETURN(s.loss_scale_good_steps, ls.integer("finite_steps"));
  ZDP_ASSIGN_OR_RETURN(const json* files, f.array("files"));
  if (files->size() > kMaxFiles) {
    return Status(StatusCode::kInvalidArgument, where + ": 'files' lists " + std::to_string(files->size()) +
                                                    " files (a checkpoint has 2)");
  }
  for (size_t i = 0; i < files->size(); ++i) {
    ZDP_ASSIGN_OR_RETURN(CheckpointFileInfo file, decode_file((*files)[i], where, i));
    for (const CheckpointFileInfo& earlier : info.files) {
      if (earlier.name == file.name) {
        return Status(StatusCode::kInvalidArgument, where + ": 'files' lists " + file.name + " twice");
      }
    }
    info.files.push_back(std::move(file));
  }
  ZDP_RETURN_IF_ERROR(check_ranges(info, where));
  return info;
}

StatusOr<std::string> read_small_file(const std::string& path) {
  return read_input_file(path, "checkpoint file", kMaxSmallFileBytes);
}

}  // namespace checkpoint

StatusOr<CheckpointInfo> read_checkpoint_info(const std::string& path_or_root) {
  ZDP_ASSIGN_OR_RETURN(const std::string dir, resolve_checkpoint(path_or_root));
  const std::string path = dir + "/" + kCheckpointStateFile;
  ZDP_ASSIGN_OR_RETURN(const std::string text, checkpoint::read_small_file(path));
  ZDP_ASSIGN_OR_RETURN(CheckpointInfo info, checkpoint::decode_state(text, path));
  // A step-<N> folder holds step N's state (the save names it so): another step there is a
  // folder renamed, copied or linked over, and resuming from it would repeat or skip
  // steps that `latest` says were taken.
  const std::string name = std::filesystem::path(dir).filename().string();
  const int64_t named = checkpoint::step_of(name, "");
  if (named >= 0 && named != info.state.step) {
    return Status(StatusCode::kInvalidArgument, dir + " is named for step " + std::to_string(named) + " but its " +
                                                    kCheckpointStateFile + " holds step " +
                                                    std::to_string(info.state.step) +
                                                    " (a checkpoint folder renamed, copied or linked over another)");
  }
  info.state.path = dir;
  return info;
}

}  // namespace zdp
