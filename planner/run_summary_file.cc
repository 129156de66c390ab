// Reading a run's train_summary.json for `dp-launch scale` (run_summary_file.h).
#include "planner/run_summary_file.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/internal/input_file.h"
#include "runtime/internal/json_checked.h"

namespace zdp::launcher {
namespace {

using nlohmann::json;

// Its loss history is bounded (loss_history.h: 4096 points) and so are its losses
// (run_summary.h: the last 16384 steps'): about 1 MiB of indented JSON at most.
constexpr int64_t kMaxSummaryBytes = int64_t{4} << 20;

std::string malformed(const std::string& path) { return "run summary " + path + " is malformed"; }
Status bad(const std::string& path, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, malformed(path) + ": " + why);
}

// A field in [lo, hi], the error naming the file and the key. An integer's float (1e20)
// is refused: converting it to int would be undefined.
StatusOr<int64_t> integer(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& path) {
  return json_checked::with_context(json_checked::integer(json_checked::member(j, key), key, lo, hi), malformed(path));
}
// A finite, non-negative number (times and rates).
StatusOr<double> number(const json& j, const char* key, const std::string& path) {
  return json_checked::with_context(
      json_checked::number(json_checked::member(j, key), key, 0, std::numeric_limits<double>::max()), malformed(path));
}

}  // namespace

StatusOr<ScalePoint> parse_run_summary(const std::string& text, const std::string& path) {
  const json j = json_checked::parse<json>(text);
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
  // null: no step (steps 0), or a loss that was not finite (JSON has no NaN): NaN either
  // way, which the report prints as "-" or "not finite" (a diverged run read as 0.0000).
  p.final_loss = loss->is_null() ? std::numeric_limits<double>::quiet_NaN() : loss->get<double>();
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
