// The Chrome trace (profile/src/chrome_trace.h) of two synthetic ranks: one compute and
// one comm lane per rank, a span per step, and an event per bucket collective.
#include "profile/src/chrome_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "tests/unit/profile_timelines.h"

namespace zdp::profile {
namespace {

using timelines::two_ranks;

TEST(ProfileTrace, OneComputeAndOneCommLanePerRankWithBucketEvents) {
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace(two_ranks(0.0), 2));
  std::map<std::pair<int, int>, std::string> lanes;
  int steps = 0, buckets = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") lanes[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] == "X" && e["tid"] == kComputeTid && e["name"].get<std::string>().rfind("step ", 0) == 0) ++steps;
    if (e["ph"] == "X" && e["tid"] == kCommTid && e["args"]["bucket"].get<int>() >= 0) {
      ++buckets;
      EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      EXPECT_GT(e["args"]["busbw_gbps"].get<double>(), 0);
    }
  }
  EXPECT_EQ(lanes, (std::map<std::pair<int, int>, std::string>{
                       {{0, 0}, "compute"}, {{0, 1}, "comm"}, {{1, 0}, "compute"}, {{1, 1}, "comm"}}));
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(buckets, 24);  // 2 ranks x 3 steps x 4 bucket collectives
}

}  // namespace
}  // namespace zdp::profile
