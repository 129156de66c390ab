// The progress records as JSON (runtime/internal/job_progress.h).
#include "runtime/internal/job_progress.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/internal/json_checked.h"

namespace zdp {
namespace {

constexpr size_t kMaxPhase = 32;

double finite_or(double v, double fallback) { return std::isfinite(v) ? v : fallback; }

StatusOr<nlohmann::json> parse(const std::string& text, const char* what) {
  if (text.size() > kMaxProgressRecord) {
    return Status(StatusCode::kInvalidArgument, std::string(what) + " record of " + std::to_string(text.size()) +
                                                    " bytes is longer than " + std::to_string(kMaxProgressRecord));
  }
  nlohmann::json j = json_checked::parse(text);
  if (!j.is_object()) return Status(StatusCode::kInvalidArgument, std::string(what) + " record is not a JSON object");
  return j;
}

// Reads `key` of `j` into `out`, or says which key is missing, mistyped or out of range:
// counts in [0, INT64_MAX], other numbers finite, a string as it is (check_phase bounds it).
Status field(const nlohmann::json& j, const char* key, const char* what, int64_t* out) {
  StatusOr<int64_t> v = json_checked::integer(json_checked::member(j, key), std::string("'") + key + "'", 0, INT64_MAX);
  if (!v.ok()) return v.status().with_context(std::string(what) + " record");
  *out = *v;
  return Status::Ok();
}
Status field(const nlohmann::json& j, const char* key, const char* what, double* out) {
  StatusOr<double> v = json_checked::finite_number(json_checked::member(j, key), std::string("'") + key + "'");
  if (!v.ok()) return v.status().with_context(std::string(what) + " record");
  *out = *v;
  return Status::Ok();
}
Status field(const nlohmann::json& j, const char* key, const char* what, std::string* out) {
  const nlohmann::json* v = json_checked::member(j, key);
  if (v == nullptr || !v->is_string()) {
    return Status(StatusCode::kInvalidArgument, std::string(what) + " record: '" + key + "' is missing or not a string");
  }
  *out = v->get<std::string>();
  return Status::Ok();
}

Status check_phase(const std::string& phase, const char* what) {
  if (phase.size() <= kMaxPhase) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, std::string(what) + " record: phase longer than " + std::to_string(kMaxPhase));
}

}  // namespace

std::string encode_progress(const JobProgress& p) {
  return nlohmann::json{{"step", p.step},
                        {"steps", p.steps},
                        {"loss", finite_or(p.loss, -1)},
                        {"tokens_per_s", finite_or(p.tokens_per_s, 0)},
                        {"elapsed_s", finite_or(p.elapsed_s, 0)},
                        {"eta_s", finite_or(p.eta_s, -1)},
                        {"phase", p.phase.substr(0, kMaxPhase)}}
      .dump();
}

std::string encode_progress(const RankProgress& p) {
  return nlohmann::json{{"step", p.step}, {"compute_s", finite_or(p.compute_s, 0)}, {"phase", p.phase.substr(0, kMaxPhase)}}
      .dump();
}

StatusOr<JobProgress> decode_job_progress(const std::string& text) {
  constexpr const char* kWhat = "job progress";
  ZDP_ASSIGN_OR_RETURN(const nlohmann::json j, parse(text, kWhat));
  JobProgress p;
  ZDP_RETURN_IF_ERROR(field(j, "step", kWhat, &p.step));
  ZDP_RETURN_IF_ERROR(field(j, "steps", kWhat, &p.steps));
  ZDP_RETURN_IF_ERROR(field(j, "loss", kWhat, &p.loss));
  ZDP_RETURN_IF_ERROR(field(j, "tokens_per_s", kWhat, &p.tokens_per_s));
  ZDP_RETURN_IF_ERROR(field(j, "elapsed_s", kWhat, &p.elapsed_s));
  ZDP_RETURN_IF_ERROR(field(j, "eta_s", kWhat, &p.eta_s));
  ZDP_RETURN_IF_ERROR(field(j, "phase", kWhat, &p.phase));
  ZDP_RETURN_IF_ERROR(check_phase(p.phase, kWhat));
  return p;
}

StatusOr<RankProgress> decode_rank_progress(const std::string& text) {
  constexpr const char* kWhat = "rank progress";
  ZDP_ASSIGN_OR_RETURN(const nlohmann::json j, parse(text, kWhat));
  RankProgress p;
  ZDP_RETURN_IF_ERROR(field(j, "step", kWhat, &p.step));
  ZDP_RETURN_IF_ERROR(field(j, "compute_s", kWhat, &p.compute_s));
  ZDP_RETURN_IF_ERROR(field(j, "phase", kWhat, &p.phase));
  ZDP_RETURN_IF_ERROR(check_phase(p.phase, kWhat));
  return p;
}

std::string format_eta(double seconds) {
  if (!(seconds >= 0 && seconds < 1e9)) return "?";  // unknown, or no ETA a person could use (31 years)
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, s % 3600 / 60);
  else if (s >= 60) std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof(buf), "%lds", s);
  return buf;
}

namespace job_keys {
std::string rank_progress(int rank) { return "zdp/progress/rank/" + std::to_string(rank); }
}  // namespace job_keys

}  // namespace zdp
