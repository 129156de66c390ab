// dp-ckpt's info, verify and export (ckpt_tool.h).
#include "tools/ckpt_tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/internal/output_file.h"
#include "core/internal/printable.h"
#include "kernels/cast.h"
#include "tools/export_temp_file.h"
#include "zdp/safetensors.h"

namespace zdp::ckpt_tool {
namespace {

namespace fs = std::filesystem;

std::string model_path(const std::string& dir) { return (fs::path(dir) / kCheckpointModelFile).string(); }

// The safetensors name of an export dtype.
StatusOr<std::string> safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::string("F32");
    case DType::kBF16: return std::string("BF16");
    case DType::kF16: return std::string("F16");
    default: break;
  }
  return Status(StatusCode::kInvalidArgument,
                std::string("export dtype ") + to_string(dtype) + " is not one of fp32, bf16, fp16");
}

// Rows of left-aligned columns, two spaces apart.
// Every cell is printable(): names and versions come from the files.
std::string table(std::vector<std::vector<std::string>> rows) {
  for (auto& row : rows) {
    for (std::string& cell : row) cell = printable(cell, 4096);
  }
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

// Makes a completed rename durable: fsync of the directory holding `path`.
void sync_parent(const std::string& path) {
  const std::string dir = fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  }
  return buf;
}

StatusOr<std::string> describe(const std::string& path_or_root) {
  ZDP_ASSIGN_OR_RETURN(const CheckpointInfo info, read_checkpoint_info(path_or_root));
  const CheckpointState& s = info.state;
  ZDP_ASSIGN_OR_RETURN(const safetensors::Reader model, safetensors::Reader::open(model_path(s.path)));
  std::vector<std::vector<std::string>> head = {
      {"checkpoint", s.path},
      {"step", std::to_string(s.step) + " (data position " + std::to_string(s.data_position) + ", optimizer step " +
                   std::to_string(s.optimizer_steps) + ")"},
      {"saved by", std::to_string(s.world_size) + " rank(s), ZeRO stage " + std::to_string(s.stage) + ", " +
                       s.compute_dtype + " compute, " + s.storage + " storage, zdp " + s.library_version},
  };
  if (s.compute_dtype == "fp16") {
    head.push_back({"loss scale", std::to_string(s.loss_scale) + " (" + std::to_string(s.loss_scale_good_steps) +
                                      " finite steps since its last change)"});
  }
  if (!s.trainer_json.empty()) {
    nlohmann::json trainer = nlohmann::json::parse(s.trainer_json, nullptr, false);
    if (trainer.is_object()) trainer.erase("config");  // long: `info --config` prints it
    head.push_back({"trainer", trainer.dump()});
  }
  for (const CheckpointFileInfo& f : info.files) {
    head.push_back({f.name, human_bytes(f.bytes) + " (" + std::to_string(f.bytes) + " bytes), checksums of " +
                                std::to_string(f.chunk_hashes.size()) + " chunk(s) of " + human_bytes(f.chunk_bytes)});
  }
  // The optimizer state saved with each tensor (checkpoint.h): what its optimizer kept.
  // Said, not required: a missing or damaged optimizer file leaves the weights to read
  // (and to export), so info describes the rest and names the file's problem.
  const StatusOr<safetensors::Reader> optimizer =
      safetensors::Reader::open((fs::path(s.path) / kCheckpointOptimizerFile).string());
  // 0, 1 or 2 tensors a parameter; any other count is a file that does not belong here
  // (verify names what is wrong with it).
  const size_t count = optimizer.ok() ? optimizer->header().tensors.size() : 0;
  const auto params = static_cast<size_t>(std::max<int64_t>(info.params, 0));
  const std::string state =
      !optimizer.ok()                       ? "unreadable: " + optimizer.status().message()
      : count == 0                          ? "none (sgd without momentum)"
      : params > 0 && count == 2 * params   ? "exp_avg and exp_avg_sq of each (adamw)"
      : params > 0 && count == params       ? "momentum_buffer of each (sgd with momentum)"
                                            : std::to_string(count) + " tensors for " + std::to_string(params) +
                                                  " parameters, not 0, 1 or 2 each: not this checkpoint's "
                                                  "(dp-ckpt verify)";
  head.push_back({"tensors", std::to_string(info.params) + " (" + std::to_string(info.elements) +
                                 " elements; optimizer state: " + state + ")"});
  std::vector<std::vector<std::string>> rows = {{"name", "dtype", "shape", "bytes"}};
  for (const safetensors::TensorInfo& t : model.header().tensors) {
    rows.push_back({t.name, t.dtype, format_shape(t.shape), std::to_string(t.bytes())});
  }
  return table(head) + "\n" + table(rows);
}

StatusOr<std::string> saved_config(const std::string& path_or_root) {
  ZDP_ASSIGN_OR_RETURN(const CheckpointInfo info, read_checkpoint_info(path_or_root));
  const nlohmann::json trainer = nlohmann::json::parse(info.state.trainer_json, nullptr, false);
  if (!trainer.is_object() || !trainer.contains("config") || !trainer.at("config").is_string()) {
    return Status(StatusCode::kNotFound, info.state.path + "/" + kCheckpointStateFile +
                                             ": the trainer stored no config (no string \"config\" in \"trainer\")");
  }
  return trainer.at("config").get<std::string>();
}

StatusOr<std::string> verify(const std::string& path_or_root) {
  ZDP_ASSIGN_OR_RETURN(const VerifyReport r, verify_checkpoint(path_or_root));
  return r.path + ": OK, " + std::to_string(r.files) + " files, " + std::to_string(r.chunks) + " chunks, " +
         human_bytes(r.bytes) + ": every checksum matches";
}

// Where the export lands: output_target's file (a device, FIFO, folder or a link to one
// refused), which must not exist yet without --force.
StatusOr<std::string> export_target(const std::string& out, bool force) {
  StatusOr<std::string> target = output_target(out, "output");
  if (!target.ok()) return Status(target.status().code(), "export: " + target.status().message());
  struct stat st {};
  if (::lstat(target->c_str(), &st) == 0 && !force) {
    return Status(StatusCode::kInvalidArgument, "export: the output " + out +
                                                    " exists: refused (pass --force to replace it)");
  }
  // Said before the checksums are read (minutes for a large model), and as the folder, not
  // as the temporary file whose creation failed.
  const fs::path folder = fs::path(*target).has_parent_path() ? fs::path(*target).parent_path() : fs::path(".");
  std::error_code ec;
  const fs::file_status folder_status = fs::status(folder, ec);
  if (!fs::is_directory(folder_status)) {
    const bool missing = folder_status.type() == fs::file_type::not_found;
    if (missing) ec.clear();
    return Status(missing ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  "export: the output's folder " + folder.string() +
                      (missing ? std::string(" does not exist")
                               : " is not a folder" + (ec ? " (" + ec.message() + ")" : std::string())));
  }
  return *target;
}

namespace {

// How many of `n` finite fp32 values were cast to an infinity of 16-bit `dtype`.
int64_t became_infinite(const float* src, const unsigned char* dst, int64_t n, DType dtype) {
  if (dtype == DType::kF32) return 0;
  const uint16_t inf_bits = dtype == DType::kF16 ? 0x7c00 : 0x7f80;  // the exponent all ones, no mantissa
  int64_t lost = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, dst + 2 * i, 2);
    if ((bits & 0x7fff) == inf_bits && std::isfinite(src[i])) ++lost;
  }
  return lost;
}

}  // namespace

StatusOr<ExportReport> export_model(const std::string& path_or_root, const ExportOptions& options) {
  ZDP_ASSIGN_OR_RETURN(const std::string out_dtype, safetensors_dtype(options.dtype));
  if (options.out.empty()) return Status(StatusCode::kInvalidArgument, "export: no output path (--out)");
  if (options.buffer_elems < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "export: buffer_elems (" + std::to_string(options.buffer_elems) + ") must be >= 1");
  }
  ZDP_ASSIGN_OR_RETURN(const std::string dir, resolve_checkpoint(path_or_root));
  std::error_code ec;
  // Never into a checkpoint, this one or another (a folder holding state.json, or a
  // node's folder in one), whose files --force would replace: checked on the path given,
  // then on where the write lands (a link resolved).
  auto refuse_inside = [&](const std::string& path) -> Status {
    const fs::path parent = fs::weakly_canonical(fs::absolute(path).parent_path(), ec);
    // ... or the folder of checkpoints itself, whose `latest` pointer --force would replace.
    if (parent == fs::weakly_canonical(dir, ec) || fs::exists(parent / kCheckpointStateFile, ec) ||
        fs::exists(parent.parent_path() / kCheckpointStateFile, ec) ||
        parent == fs::weakly_canonical(fs::absolute(dir).parent_path(), ec) ||
        fs::exists(parent / kCheckpointLatestFile, ec)) {
      return Status(StatusCode::kInvalidArgument, "export: the output " + options.out +
                                                      (path == options.out ? "" : " (a link to " + path + ")") +
                                                      " is inside a checkpoint (" + parent.string() +
                                                      "): write it elsewhere");
    }
    return Status::Ok();
  };
  ZDP_RETURN_IF_ERROR(refuse_inside(options.out));
  ZDP_ASSIGN_OR_RETURN(const std::string target, export_target(options.out, options.force));
  ZDP_RETURN_IF_ERROR(refuse_inside(target));
  // The model file only: export reads nothing else (a damaged optimizer file does not
  // block exporting intact weights).
  if (options.verify) ZDP_RETURN_IF_ERROR(verify_checkpoint(dir, VerifyScope::kModel).status());

  ZDP_ASSIGN_OR_RETURN(const safetensors::Reader in, safetensors::Reader::open(model_path(dir)));
  std::vector<safetensors::TensorSpec> specs;
  for (const safetensors::TensorInfo& t : in.header().tensors) {
    if (t.dtype != "F32") {
      return Status(StatusCode::kInvalidArgument, in.path() + ": tensor '" + t.name + "' is " + t.dtype +
                                                      ", not F32: not a zdp master-weight file");
    }
    specs.push_back({t.name, out_dtype, t.shape});
  }
  std::map<std::string, std::string> metadata = in.header().metadata;
  metadata["format"] = "pt";
  ZDP_ASSIGN_OR_RETURN(const safetensors::Header header, safetensors::make_header(specs, metadata));

  // A temporary file of our own beside the target, renamed over it only when complete
  // (export_temp_file.h: exclusive, the replaced file's permissions, removed on a signal).
  ExportReport report;
  struct stat replaced {};
  const bool replaces = ::stat(target.c_str(), &replaced) == 0;
  ZDP_ASSIGN_OR_RETURN(const std::unique_ptr<ExportTempFile> temp,
                       ExportTempFile::create(target, replaced.st_mode, replaces, &report.removed_leftovers));
  const std::string& tmp = temp->path();
  report.source = dir;
  report.out = options.out;
  const int64_t out_size = safetensors::dtype_size(out_dtype);
  int64_t largest = 1;  // no buffer larger than the largest tensor
  for (const safetensors::TensorInfo& t : in.header().tensors) largest = std::max(largest, t.numel());
  const size_t buffer = static_cast<size_t>(std::min(options.buffer_elems, largest));
  std::vector<float> src(buffer);
  std::vector<unsigned char> dst(buffer * static_cast<size_t>(out_size));
  report.buffer_bytes = static_cast<int64_t>(src.size() * sizeof(float) + dst.size());
  Status written = [&]() -> Status {
    ZDP_ASSIGN_OR_RETURN(safetensors::Writer w, safetensors::Writer::create(tmp, header));
    for (size_t i = 0; i < header.tensors.size(); ++i) {
      const safetensors::TensorInfo& from = in.header().tensors[i];
      const safetensors::TensorInfo& to = header.tensors[i];
      const int64_t n = from.numel();
      for (int64_t at = 0; at < n; at += options.buffer_elems) {
        const int64_t count = std::min(options.buffer_elems, n - at);
        ZDP_RETURN_IF_ERROR(in.read(from.begin + at * 4, src.data(), count * 4));
        ZDP_RETURN_IF_ERROR(kernels::cast_cpu({src.data(), DType::kF32, dst.data(), options.dtype, count}));
        if (const int64_t lost = became_infinite(src.data(), dst.data(), count, options.dtype); lost > 0) {
          if (report.overflowed_tensors.empty() || report.overflowed_tensors.back().first != from.name) {
            report.overflowed_tensors.emplace_back(from.name, 0);
          }
          report.overflowed_tensors.back().second += lost;
          report.overflowed += lost;
        }
        ZDP_RETURN_IF_ERROR(w.write(to.begin + at * out_size, dst.data(), count * out_size));
      }
      report.elements += n;
      ++report.tensors;
    }
    ZDP_RETURN_IF_ERROR(w.sync());
    return w.close();
  }();
  if (written.ok()) written = temp->rename_to(target);
  if (!written.ok()) return written;  // the temporary file goes with `temp`
  sync_parent(target);
  report.bytes = static_cast<int64_t>(header.data_bytes()) + static_cast<int64_t>(safetensors::encode_header(header).size());
  return report;
}

}  // namespace zdp::ckpt_tool
