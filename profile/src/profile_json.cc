// RankProfile <-> JSON for the trip through the store, and profile.jsonl's step lines.
#include "profile/src/profile_json.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "runtime/internal/json_checked.h"

namespace zdp::profile {

using nlohmann::json;

std::string rank_to_json(const RankProfile& profile) {
  json steps = json::array();
  for (const StepProfile& s : profile.steps) {
    json spans = json::array(), collectives = json::array(), memory = json::array();
    for (const Span& sp : s.spans) spans.push_back({static_cast<int>(sp.part), sp.begin, sp.end});
    for (const CollectiveTiming& c : s.collectives) {
      collectives.push_back({c.bucket, static_cast<int>(c.op), c.bytes, c.begin, c.end, c.reduction});
    }
    for (const MemoryCounters& m : s.memory) memory.push_back({m.current_bytes, m.peak_bytes});
    steps.push_back({{"step", s.step},
                     {"begin", s.begin},
                     {"end", s.end},
                     {"parts", s.parts},
                     {"spans", spans},
                     {"collectives", collectives},
                     {"memory", memory},
                     {"memory_total", {s.memory_total.current_bytes, s.memory_total.peak_bytes}}});
  }
  return json{{"rank", profile.rank}, {"host", profile.host}, {"steps", steps}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// What rank_from_json refuses: thrown inside it, where the fields are walked, and turned
// into its kInvalidArgument with the json library's own errors.
struct NotAProfile : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer field in [lo, hi] (json_checked.h says why not get<int>()): a part or an op
// outside its enum would be drawn as "?" and summed apart from every real one (an op of
// 267 wrapped to 11 in the uint8_t enum); StepProfile::part() indexes an array by the part.
int64_t integer(const json& v, int64_t lo, int64_t hi, const char* what) {
  StatusOr<int64_t> x = json_checked::integer(&v, what, lo, hi);
  if (!x.ok()) throw NotAProfile(x.status().message());
  return *x;
}
// A time or a part's seconds: any finite number (the clock's origin is the rank's own).
double number(const json& v, const char* what) {
  StatusOr<double> x = json_checked::finite_number(&v, what);
  if (!x.ok()) throw NotAProfile(x.status().message());
  return *x;
}
const json& array(const json& v, size_t min_size, size_t max_size, const char* what) {
  if (!v.is_array() || v.size() < min_size || v.size() > max_size) {
    throw NotAProfile(std::string(what) + " is not an array of " + std::to_string(min_size) + " to " +
                      std::to_string(max_size) + " elements");
  }
  return v;
}
MemoryCounters counters(const json& v) {
  const json& a = array(v, 2, 2, "memory counters");
  return MemoryCounters{integer(a[0], 0, INT64_MAX, "memory bytes"), integer(a[1], 0, INT64_MAX, "peak memory bytes")};
}

constexpr size_t kMaxHostChars = 255;  // a host name's longest (POSIX HOST_NAME_MAX)
constexpr size_t kMaxEntries = size_t{1} << 24;  // the store's cap on a value bounds these long before

}  // namespace

StatusOr<RankProfile> rank_from_json(const std::string& text, const std::string& what) {
  try {
    const json j = json_checked::parse(text);
    if (j.is_discarded()) throw NotAProfile("not JSON, or nested deeper than " + std::to_string(json_checked::kMaxNesting) + " levels");
    if (!j.is_object()) throw NotAProfile("not a JSON object");
    RankProfile p;
    p.rank = static_cast<int>(integer(j.at("rank"), 0, INT32_MAX, "rank"));
    if (!j.at("host").is_string() || j.at("host").get_ref<const std::string&>().size() > kMaxHostChars) {
      throw NotAProfile("host is not a string of at most " + std::to_string(kMaxHostChars) + " characters");
    }
    p.host = j.at("host").get<std::string>();
    for (const json& js : array(j.at("steps"), 0, kMaxEntries, "steps")) {
      if (!js.is_object()) throw NotAProfile("a step is not an object");
      StepProfile s;
      s.step = integer(js.at("step"), 0, INT64_MAX, "step");
      s.begin = number(js.at("begin"), "begin");
      s.end = number(js.at("end"), "end");
      const json& parts = array(js.at("parts"), kNumStepParts, kNumStepParts, "parts");
      for (size_t i = 0; i < s.parts.size(); ++i) s.parts[i] = number(parts[i], "a part's seconds");
      for (const json& sp : array(js.at("spans"), 0, kMaxEntries, "spans")) {
        const json& a = array(sp, 3, 3, "a span");
        s.spans.push_back(Span{static_cast<StepPart>(integer(a[0], 0, kNumStepParts - 1, "a span's part")),
                               number(a[1], "a span's begin"), number(a[2], "a span's end")});
      }
      for (const json& c : array(js.at("collectives"), 0, kMaxEntries, "collectives")) {
        const json& a = array(c, 5, 6, "a collective");
        if (a.size() > 5 && !a[5].is_boolean()) throw NotAProfile("a collective's reduction flag is not a boolean");
        s.collectives.push_back(CollectiveTiming{
            static_cast<int>(integer(a[0], -1, INT32_MAX, "a collective's bucket")),
            static_cast<CollectiveOp>(integer(a[1], 0, kNumCollectiveOps - 1, "a collective's op")),
            integer(a[2], 0, INT64_MAX, "a collective's bytes"), number(a[3], "a collective's begin"),
            number(a[4], "a collective's end"), a.size() > 5 && a[5].get<bool>()});
      }
      const json& mem = array(js.at("memory"), 0, s.memory.size(), "memory");
      for (size_t i = 0; i < mem.size(); ++i) s.memory[i] = counters(mem[i]);
      s.memory_total = counters(js.at("memory_total"));
      p.steps.push_back(std::move(s));
    }
    return p;
  } catch (const json::exception& e) {
    return Status(StatusCode::kInvalidArgument, what + " is not a profile: " + e.what());
  } catch (const NotAProfile& e) {
    return Status(StatusCode::kInvalidArgument, what + " is not a profile: " + e.what());
  }
}

json step_line(const StepProfile& s, int rank, int world_size, double origin) {
  json parts = json::object();
  for (int p = 0; p < kNumStepParts; ++p) parts[to_string(static_cast<StepPart>(p))] = s.parts[static_cast<size_t>(p)] * 1e3;
  json memory = json::object();
  for (int c = 0; c < kNumMemCategories; ++c) {
    const MemoryCounters& m = s.memory[static_cast<size_t>(c)];
    memory[to_string(static_cast<MemCategory>(c))] = {{"current", m.current_bytes}, {"peak", m.peak_bytes}};
  }
  json collectives = json::array();
  for (const CollectiveTiming& c : s.collectives) {
    collectives.push_back({{"bucket", c.bucket},
                           {"op", collective_name(c.op)},
                           {"reduction", c.reduction},
                           {"bytes", c.bytes},
                           {"start_ms", (c.begin - origin) * 1e3},
                           {"end_ms", (c.end - origin) * 1e3},
                           {"busbw_gbps", c.busbw(world_size) / 1e9}});
  }
  memory["total"] = {{"current", s.memory_total.current_bytes}, {"peak", s.memory_total.peak_bytes}};
  return json{{"type", "step"},
              {"rank", rank},
              {"step", s.step + 1},  // counted from 1, as the console, the summary and the trace do
              {"start_ms", (s.begin - origin) * 1e3},
              {"step_ms", s.seconds() * 1e3},
              {"parts_ms", parts},
              {"compute_ms", s.compute() * 1e3},
              {"comm_ms", s.comm() * 1e3},
              // One rank exchanges nothing: its waits are host work (profile_summary.cc).
              {"exposed_comm_ms", world_size > 1 ? s.exposed_comm() * 1e3 : 0.0},
              {"memory", memory},
              {"collectives", collectives}};
}

}  // namespace zdp::profile
