// RankProfile <-> JSON for the trip through the store, and profile.jsonl's step lines.
#include "profile/src/profile_json.h"

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
  return json{{"rank", profile.rank}, {"host", profile.host}, {"steps", steps}}.dump();
}

StatusOr<RankProfile> rank_from_json(const std::string& text, const std::string& what) {
  try {
    const json j = json::parse(text);
    RankProfile p;
    p.rank = j.at("rank").get<int>();
    p.host = j.at("host").get<std::string>();
    for (const json& js : j.at("steps")) {
      StepProfile s;
      s.step = js.at("step").get<int64_t>();
      s.begin = js.at("begin").get<double>();
      s.end = js.at("end").get<double>();
      s.parts = js.at("parts").get<std::array<double, kNumStepParts>>();
      for (const json& sp : js.at("spans")) {
        s.spans.push_back(Span{static_cast<StepPart>(sp.at(0).get<int>()), sp.at(1).get<double>(), sp.at(2).get<double>()});
      }
      for (const json& c : js.at("collectives")) {
        s.collectives.push_back(CollectiveTiming{c.at(0).get<int>(), static_cast<CollectiveOp>(c.at(1).get<int>()),
                                                 c.at(2).get<int64_t>(), c.at(3).get<double>(), c.at(4).get<double>(),
                                                 c.size() > 5 && c.at(5).get<bool>()});
      }
      const json& mem = js.at("memory");
      for (size_t i = 0; i < s.memory.size() && i < mem.size(); ++i) {
        s.memory[i] = MemoryCounters{mem.at(i).at(0).get<int64_t>(), mem.at(i).at(1).get<int64_t>()};
      }
      const json& total = js.at("memory_total");
      s.memory_total = MemoryCounters{total.at(0).get<int64_t>(), total.at(1).get<int64_t>()};
      p.steps.push_back(std::move(s));
    }
    return p;
  } catch (const json::exception& e) {
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
                           {"bytes", c.bytes},
                           {"start_ms", (c.begin - origin) * 1e3},
                           {"end_ms", (c.end - origin) * 1e3},
                           {"busbw_gbps", c.busbw(world_size) / 1e9}});
  }
  memory["total"] = {{"current", s.memory_total.current_bytes}, {"peak", s.memory_total.peak_bytes}};
  return json{{"type", "step"},
              {"rank", rank},
              {"step", s.step},
              {"start_ms", (s.begin - origin) * 1e3},
              {"step_ms", s.seconds() * 1e3},
              {"parts_ms", parts},
              {"compute_ms", s.compute() * 1e3},
              {"comm_ms", s.comm() * 1e3},
              {"exposed_comm_ms", s.exposed_comm() * 1e3},
              {"memory", memory},
              {"collectives", collectives}};
}

}  // namespace zdp::profile
