// chrome_trace(): "X" complete events and "M" thread/process names (chrome_trace.h).
#include "profile/src/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace zdp::profile {

using nlohmann::json;

namespace {

json complete(const std::string& name, int pid, int tid, double begin_us, double end_us, json args) {
  return json{{"name", name}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", begin_us},
              {"dur", std::max(0.0, end_us - begin_us)}, {"args", std::move(args)}};
}

json metadata(const char* what, int pid, int tid, const std::string& name) {
  json m = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

}  // namespace

double time_origin(const std::vector<RankProfile>& ranks, const RankProfile& rank) {
  bool one_host = true;
  double common = std::numeric_limits<double>::infinity();
  for (const RankProfile& r : ranks) {
    one_host = one_host && r.host == ranks.front().host;
    if (!r.steps.empty()) common = std::min(common, r.steps.front().begin);
  }
  if (one_host && std::isfinite(common)) return common;
  return rank.steps.empty() ? 0.0 : rank.steps.front().begin;
}

std::string chrome_trace(const std::vector<RankProfile>& ranks, int world_size) {
  json events = json::array();
  for (const RankProfile& r : ranks) {
    events.push_back(metadata("process_name", r.rank, -1, "rank " + std::to_string(r.rank) + " (" + r.host + ")"));
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r.rank}, {"args", {{"sort_index", r.rank}}}});
    events.push_back(metadata("thread_name", r.rank, kComputeTid, "compute"));
    events.push_back(metadata("thread_name", r.rank, kCommTid, "comm"));
    if (r.steps.empty()) continue;
    const double origin = time_origin(ranks, r);
    auto us = [origin](double seconds) { return (seconds - origin) * 1e6; };
    for (const StepProfile& s : r.steps) {
      events.push_back(complete("step " + std::to_string(s.step + 1), r.rank, kComputeTid, us(s.begin), us(s.end),
                                {{"step", s.step + 1}, {"ms", s.seconds() * 1e3}}));
      for (const Span& sp : s.spans) {
        events.push_back(complete(to_string(sp.part), r.rank, kComputeTid, us(sp.begin), us(sp.end), {{"step", s.step + 1}}));
      }
      for (const CollectiveTiming& c : s.collectives) {
        const std::string op = collective_label(c.op, c.reduction);
        const std::string name = c.bucket < 0 ? op + " norm" : op + " b" + std::to_string(c.bucket);
        events.push_back(complete(name, r.rank, kCommTid,
                                  us(c.begin), us(c.end),
                                  {{"step", s.step + 1},
                                   {"bucket", c.bucket},
                                   {"op", collective_name(c.op)},
                                   {"bytes", c.bytes},
                                   {"busbw_gbps", c.busbw(world_size) / 1e9}}));
      }
    }
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace zdp::profile
