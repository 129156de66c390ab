// Reading a profile's kernel times (kernel_profile_file.h).
#include "planner/kernel_profile_file.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/internal/input_file.h"
#include "core/internal/printable.h"
#include "runtime/internal/config_limits.h"
#include "runtime/internal/gpu_datasheets.h"
#include "runtime/internal/json_checked.h"

namespace zdp::launcher {
namespace {

using nlohmann::json;
using trainer::KernelRegion;

constexpr int64_t kMaxKernelsBytes = 1 << 20;       // a few kB in practice
constexpr int64_t kMaxProfileBytes = 512ll << 20;   // the profiler's own cap on what it gathers
constexpr double kMaxMsPerStep = 1e9;               // 11.6 days: anything above is corrupt
constexpr int64_t kMaxBucketElems = int64_t{1} << 40;  // 4 TiB of fp32: more than any GPU holds

Status bad(const std::string& path, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, path + ": " + why);
}

// A field of `j` in [lo, hi], the error naming the file (bad()'s form) and the field.
StatusOr<int64_t> int_field(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& path,
                            const std::string& where) {
  return json_checked::with_context(json_checked::integer(json_checked::member(j, key), where + key, lo, hi), path);
}
StatusOr<double> number_field(const json& j, const char* key, double hi, const std::string& path,
                              const std::string& where) {
  return json_checked::with_context(json_checked::number(json_checked::member(j, key), where + key, 0, hi), path);
}

StatusOr<std::string> string_field(const json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return bad(path, std::string(key) + " is missing or not a string");
  std::string v = it->get<std::string>();
  if (v.size() > 256) return bad(path, std::string(key) + " is longer than 256 characters");
  return v;
}

StatusOr<bool> bool_field(const json& j, const char* key, const std::string& path, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return bad(path, where + key + " is missing or not a boolean");
  return it->get<bool>();
}

// Version 3's "engine": what the engine ran, on which the planner prices its rows.
Status parse_engine(const json& j, const std::string& path, MeasuredKernels* m) {
  const auto engine = j.find("engine");
  if (engine == j.end() || !engine->is_object()) return bad(path, "engine is missing or not an object");
  const std::string w = "engine.";
  ZDP_ASSIGN_OR_RETURN(m->deterministic, bool_field(*engine, "deterministic", path, w));
  ZDP_ASSIGN_OR_RETURN(m->sharded_accumulation, bool_field(*engine, "sharded_accumulation", path, w));
  ZDP_ASSIGN_OR_RETURN(m->reduce_dtype, string_field(*engine, "reduce_dtype", path));
  if (m->reduce_dtype != "fp32" && m->reduce_dtype != "bf16" && m->reduce_dtype != "fp16") {
    return bad(path, "engine.reduce_dtype is '" + printable(m->reduce_dtype, 64) + "', not fp32, bf16 or fp16");
  }
  const auto buckets = engine->find("buckets");
  if (buckets == engine->end() || !buckets->is_array() || buckets->empty()) {
    return bad(path, "engine.buckets is missing, empty or not an array");
  }
  m->buckets.clear();
  for (size_t i = 0; i < buckets->size(); ++i) {
    ZDP_ASSIGN_OR_RETURN(const int64_t elems,
                         json_checked::with_context(json_checked::integer(&(*buckets)[i], "engine.buckets[" + std::to_string(i) + "]",
                                                                          1, kMaxBucketElems),
                                                    path));
    m->buckets.push_back(elems);
  }
  m->has_engine = true;
  return Status::Ok();
}

}  // namespace

Status parse_kernel_times(const std::string& text, const std::string& path, MeasuredKernels* m) {
  const json j = json_checked::parse<json>(text);
  if (j.is_discarded() || !j.is_object()) return bad(path, "not a JSON object (dp-train writes it with profile.kernels)");
  ZDP_ASSIGN_OR_RETURN(const std::string format, string_field(j, "format", path));
  if (format != trainer::kKernelTimesFormat) {
    return bad(path, "format is '" + printable(format, 64) + "', not '" + trainer::kKernelTimesFormat + "'");
  }
  ZDP_ASSIGN_OR_RETURN(const int64_t version, int_field(j, "version", 1, 1000, path, ""));
  m->version = version;
  if (version > trainer::kKernelTimesVersion) {
    return bad(path, "version " + std::to_string(version) + " is not a version this dp-launch reads (1 to " +
                         std::to_string(trainer::kKernelTimesVersion) + ")");
  }
  ZDP_ASSIGN_OR_RETURN(m->device, string_field(j, "device", path));
  ZDP_ASSIGN_OR_RETURN(m->device_kind, string_field(j, "device_kind", path));
  if (version >= 2) {
    ZDP_ASSIGN_OR_RETURN(m->world_size, int_field(j, "world_size", 1, config_internal::kMaxWorldSize, path, ""));
    ZDP_ASSIGN_OR_RETURN(m->zero_stage, int_field(j, "zero_stage", 0, 3, path, ""));
  }
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return bad(path, "model is missing or not an object");
  const std::string w = "model.";
  // The config's own bounds on a model: a profile's model is one a config described.
  ZDP_ASSIGN_OR_RETURN(m->layers, int_field(*model, "layers", 1, config_internal::kMaxLayers, path, w));
  ZDP_ASSIGN_OR_RETURN(m->d_model, int_field(*model, "d_model", 1, config_internal::kMaxWidth, path, w));
  ZDP_ASSIGN_OR_RETURN(m->heads, int_field(*model, "heads", 1, config_internal::kMaxHeads, path, w));
  ZDP_ASSIGN_OR_RETURN(m->vocab, int_field(*model, "vocab", 1, config_internal::kMaxVocab, path, w));
  ZDP_ASSIGN_OR_RETURN(m->seq, int_field(*model, "seq", 1, config_internal::kMaxSeqLen, path, w));
  ZDP_ASSIGN_OR_RETURN(m->micro_batch, int_field(*model, "micro_batch", 1, 1 << 24, path, w));
  ZDP_ASSIGN_OR_RETURN(m->accum_steps, int_field(*model, "accum_steps", 1, 1 << 24, path, w));
  ZDP_ASSIGN_OR_RETURN(m->dtype, string_field(*model, "dtype", path));
  const auto fused = model->find("fused_attention");
  if (fused == model->end() || !fused->is_boolean()) return bad(path, "model.fused_attention is missing or not a boolean");
  m->fused_attention = fused->get<bool>();
  if (version >= 3) {
    ZDP_ASSIGN_OR_RETURN(m->dgelu_epilogue, bool_field(*model, "dgelu_epilogue", path, w));
    ZDP_RETURN_IF_ERROR(parse_engine(j, path, m));
  }
  ZDP_ASSIGN_OR_RETURN(m->steps, int_field(j, "steps", 1, int64_t{1} << 40, path, ""));
  const auto regions = j.find("regions");
  if (regions == j.end() || !regions->is_array()) return bad(path, "regions is missing or not an array");
  if (regions->size() > static_cast<size_t>(trainer::kNumKernelRegions)) return bad(path, "more regions than the gpt has");
  for (size_t i = 0; i < regions->size(); ++i) {
    const json& r = (*regions)[i];
    const std::string where = "regions[" + std::to_string(i) + "].";
    if (!r.is_object()) return bad(path, where + " is not an object");
    ZDP_ASSIGN_OR_RETURN(const std::string name, string_field(r, "name", path));
    KernelRegion region;
    if (!trainer::region_from_name(name, &region)) return bad(path, where + "name '" + printable(name, 64) + "' is not a gpt kernel region");
    const auto k = static_cast<size_t>(region);
    if (m->present[k]) return bad(path, where + "name '" + printable(name, 64) + "' appears twice");
    ZDP_ASSIGN_OR_RETURN(const double ms, number_field(r, "ms_per_step", kMaxMsPerStep, path, where));
    ZDP_ASSIGN_OR_RETURN(const double entries, number_field(r, "entries_per_step", 1e12, path, where));
    m->present[k] = true;
    m->seconds[k] = ms / 1e3;
    m->entries[k] = entries;
  }
  return Status::Ok();
}

// Rank 0's step lines: their mean step time, optimizer and norm parts and exposed communication.
Status parse_profile_steps(const std::string& text, const std::string& path, MeasuredKernels* m) {
  std::istringstream lines(text);
  std::string line;
  double step = 0, optimizer = 0, exposed = 0, norm = 0;
  int64_t n = 0, at = 0, norm_lines = 0;
  while (std::getline(lines, line)) {
    ++at;
    if (line.empty()) continue;
    // Every line, not only those that name a step: a line cut short before its "step" key
    // (a file truncated by a full disk or a copy) was skipped, and the mean taken over
    // the step lines left.
    const json j = json_checked::parse<json>(line);
    if (j.is_discarded() || !j.is_object()) {
      return bad(path, "line " + std::to_string(at) + " is not a JSON object (a file cut short?)");
    }
    // Only dp-train's step lines count, and only rank 0's; a line that says it is a
    // step line must say whose (value() would throw on a mistyped field: checked first).
    const auto type = j.find("type");
    if (type == j.end() || !type->is_string() || type->get_ref<const std::string&>() != "step") continue;
    const std::string where = "line " + std::to_string(at) + ": ";
    ZDP_ASSIGN_OR_RETURN(const int64_t rank, int_field(j, "rank", 0, int64_t{1} << 30, path, where));
    if (rank != 0) continue;
    ZDP_ASSIGN_OR_RETURN(const double s, number_field(j, "step_ms", kMaxMsPerStep, path, where));
    ZDP_ASSIGN_OR_RETURN(const double e, number_field(j, "exposed_comm_ms", kMaxMsPerStep, path, where));
    const auto parts = j.find("parts_ms");
    if (parts == j.end() || !parts->is_object()) return bad(path, where + "parts_ms is missing");
    ZDP_ASSIGN_OR_RETURN(const double o, number_field(*parts, "optimizer", kMaxMsPerStep, path, where + "parts_ms."));
    // The norm part (older profiles and other writers may lack it: then no norm figure).
    if (parts->find("norm") != parts->end()) {
      ZDP_ASSIGN_OR_RETURN(const double g, number_field(*parts, "norm", kMaxMsPerStep, path, where + "parts_ms."));
      norm += g;
      ++norm_lines;
    }
    step += s, exposed += e, optimizer += o;
    ++n;
  }
  if (n == 0) return Status::Ok();
  m->profile_steps = n;
  m->step_s = step / 1e3 / static_cast<double>(n);
  m->optimizer_s = optimizer / 1e3 / static_cast<double>(n);
  if (norm_lines == n) m->norm_s = norm / 1e3 / static_cast<double>(n);
  m->exposed_comm_s = exposed / 1e3 / static_cast<double>(n);
  return Status::Ok();
}

StatusOr<MeasuredKernels> read_measured_kernels(const std::string& dir) {
  MeasuredKernels m;
  m.dir = dir;
  const std::string kernels = dir + "/kernels.json";
  StatusOr<std::string> text = read_input_file(kernels, "kernel times", kMaxKernelsBytes);
  if (text.status().code() == StatusCode::kNotFound) {
    return Status(StatusCode::kNotFound, kernels + " does not exist: profile a run with profile.enabled = true "
                                                   "and profile.kernels = true (profile.dir = " + dir + ")");
  }
  ZDP_RETURN_IF_ERROR(text.status());
  ZDP_RETURN_IF_ERROR(parse_kernel_times(*text, kernels, &m));
  const std::string profile = dir + "/profile.jsonl";
  text = read_input_file(profile, "profile", kMaxProfileBytes);
  if (text.status().code() == StatusCode::kNotFound) return m;  // optional
  ZDP_RETURN_IF_ERROR(text.status());
  ZDP_RETURN_IF_ERROR(parse_profile_steps(*text, profile, &m));
  return m;
}

std::string gpu_name_of_device(const std::string& device) {
  const GpuSpec* gpu = gpu_of_device(device);
  return gpu ? gpu->name : "";
}

}  // namespace zdp::launcher
