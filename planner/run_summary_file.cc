// Reading a run's train_summary.json for `dp-launch scale` (run_summary_file.h).
#include "planner/run_summary_file.h"

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/internal/input_file.h"

namespace zdp::launcher {
namespace {

using nlohmann::json;

constexpr int64_t kMaxSummaryBytes = int64_t{1} << 20;  // its loss history is bounded (loss_history.h)

Status bad(const std::string& path, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, "run summary " + path + " is malformed: " + why);
}

// An integer field in [lo, hi]; a float is refused (converting 1e20 to int is undefined).
StatusOr<int64_t> integer(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return bad(path, std::string(key) + " is missing or not an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return bad(path, std::string(key) + " = " + it->dump() + " is out of range");
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return bad(path, std::string(key) + " = " + it->dump() + " is out of range");
  return v;
}

// A finite, non-negative number (times and rates).
StatusOr<double> number(const json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return bad(path, std::string(key) + " is missing or not a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) return bad(path, std::string(key) + " = " + it->dump() + " is out of range");
  return v;
}

}  // namespace

StatusOr<ScalePoint> parse_run_summary(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad(path, "not a JSON object");
  ScalePoint p;
  ZDP_ASSIGN_OR_RETURN(const int64_t world, integer(j, "world_size", 1, int64_t{1} << 24, path));
  ZDP_ASSIGN_OR_RETURN(const int64_t stage, integer(j, "stage", 0, 3, path));
  p.world_size = static_cast<int>(world);
  p.stage = static_cast<int>(stage);
  ZDP_ASSIGN_OR_RETURN(p.global_batch, integer(j, "global_batch", 1, INT64_MAX, path));
  ZDP_ASSIGN_OR_RETURN(p.steps, integer(j, "steps", 0, INT64_MAX, path));
  ZDP_ASSIGN_OR_RETURN(p.step_time_s, number(j, "step_time_s_median", path));
  ZDP_ASSIGN_OR_RETURN(p.samples_per_s, number(j, "samples_per_s", path));
  ZDP_ASSIGN_OR_RETURN(p.tokens_per_s, number(j, "tokens_per_s", path));
  // null when the run took no step; a loss may be any finite number (not only >= 0).
  const auto loss = j.find("final_loss");
  if (loss == j.end() || !(loss->is_null() || (loss->is_number() && std::isfinite(loss->get<double>())))) {
    return bad(path, "final_loss is missing or not a finite number or null");
  }
  p.final_loss = loss->is_null() ? 0.0 : loss->get<double>();
  p.summary_path = path;
  return p;
}

StatusOr<ScalePoint> read_run_summary(const std::string& path) {
  StatusOr<std::string> text = read_input_file(path, "run summary", kMaxSummaryBytes);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) return text.status();
    return Status(StatusCode::kNotFound, "no run summary at " + path + " (did dp-train finish?)");
  }
  return parse_run_summary(*text, path);
}

}  // namespace zdp::launcher
