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

// A profile arrives from another rank through the store: what would index past an array
// later (a part or an op outside its enum) or convert out of range (a float where an
// integer belongs) is refused here, naming the field (tests/fuzz/rank_profile_fuzz.cc).
TEST(ProfileJson, RefusesFieldsOutOfTheirRange) {
  const std::string good = rank_to_json(two_ranks(1.0)[1]);
  ASSERT_TRUE(rank_from_json(good, "rank 1's profile").ok());
  const auto error = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from << " not in " << text;
    if (at == std::string::npos) return std::string();
    text.replace(at, from.size(), to);
    const StatusOr<RankProfile> p = rank_from_json(text, "rank 1's profile");
    return p.ok() ? std::string("ok") : p.status().message();
  };
  EXPECT_NE(error("\"rank\":1", "\"rank\":1.5").find("rank is not an integer"), std::string::npos);
  EXPECT_NE(error("\"rank\":1", "\"rank\":1e20").find("rank is not an integer"), std::string::npos);
  EXPECT_NE(error("\"step\":", "\"step\":18446744073709551615,\"was\":").find("step = 18446744073709551615 is outside"),
            std::string::npos);
  EXPECT_NE(error("\"rank\":1", "\"rank\":-1").find("rank = -1 is outside [0, 2147483647]"), std::string::npos);
  EXPECT_NE(error("\"spans\":[[", "\"spans\":[[9,0,0],[").find("a span's part = 9 is outside [0, 8]"), std::string::npos);
  EXPECT_NE(error("\"collectives\":[[", "\"collectives\":[[0,6,1,0,0],[").find("a collective's op = 6 is outside [0, 5]"),
            std::string::npos);
  EXPECT_NE(error("\"parts\":[", "\"parts\":[1,").find("parts is not an array of 9 to 9 elements"), std::string::npos);
  EXPECT_NE(error("\"memory_total\":[", "\"memory_total\":[-1,0],\"was\":[").find("memory bytes = -1 is below 0"),
            std::string::npos);
}

}  // namespace
}  // namespace zdp::profile
