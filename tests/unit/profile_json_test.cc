// A rank's profile as JSON (profile/src/profile_json.h): it survives the trip through
// the store, and what is not a profile is refused by name.
#include "profile/src/profile_json.h"

#include <gtest/gtest.h>

#include "tests/unit/profile_timelines.h"

namespace zdp::profile {
namespace {

using timelines::two_ranks;

TEST(ProfileJson, RankProfilesSurviveTheStore) {
  const RankProfile p = two_ranks(1.0)[1];
  const StatusOr<RankProfile> q = rank_from_json(rank_to_json(p), "rank 1's profile");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  ASSERT_EQ(q->steps.size(), p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(q->steps[i].parts, p.steps[i].parts);
    EXPECT_EQ(q->steps[i].spans.size(), p.steps[i].spans.size());
    EXPECT_EQ(q->steps[i].collectives.size(), p.steps[i].collectives.size());
    EXPECT_EQ(q->steps[i].memory_total.peak_bytes, p.steps[i].memory_total.peak_bytes);
  }
  const StatusOr<RankProfile> bad = rank_from_json("{\"rank\": 1}", "rank 1's profile");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank 1's profile is not a profile"), std::string::npos);
}

}  // namespace
}  // namespace zdp::profile
