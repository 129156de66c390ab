// Every rank trains on the same dataset (trainer/data/same_data.h): rank 0 publishes its
// sample counts and a sampled digest of its data, every other rank compares its own.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "trainer/data/same_data.h"
#include "trainer/data/source.h"
#include "trainer/data/token_file.h"
#include "zdp/store.h"

namespace zdp::trainer {
namespace {

using testing::TempDir;

// Every rank trains on the same dataset (trainer/data/same_data.h).
TEST(DataAgreement, RanksThatSeeTheSameDataPassAndOneThatDiffersIsNamedWithBothSizes) {
  InMemoryStore store;
  const DataIdentity train{1000, "a"}, val{200, "b"};
  ASSERT_TRUE(check_same_data(store, 0, train, val, "data.path", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(check_same_data(store, 1, train, val, "data.path", std::chrono::seconds(1)).ok());
  const Status differs = check_same_data(store, 2, {900, "a"}, {}, "data.path = \"d/*.bin\"", std::chrono::seconds(1));
  ASSERT_FALSE(differs.ok());
  EXPECT_EQ(differs.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(differs.message(),
            "rank 2 sees 900 training samples and no held-out set, rank 0 sees 1000 training samples and 200 held-out "
            "samples (data.path = \"d/*.bin\"): every rank must read the same data; a glob matched different files on "
            "their nodes, or a node's copy differs");
}

TEST(DataAgreement, SetsOfTheSameSizeButOtherContentsAreRefusedNamingTheSplitAndBothDigests) {
  InMemoryStore store;
  ASSERT_TRUE(check_same_data(store, 0, {1000, "corpus"}, {200, "held out"}, "data.path", std::chrono::seconds(1)).ok());
  const Status train = check_same_data(store, 1, {1000, "other corpus"}, {200, "held out"}, "data.path",
                                       std::chrono::seconds(1));
  ASSERT_FALSE(train.ok());
  EXPECT_NE(train.message().find("rank 1's training data has as many samples as rank 0's (1000) but other contents "
                                 "(sampled digest "),
            std::string::npos) << train.message();
  const Status val = check_same_data(store, 3, {1000, "corpus"}, {200, "other"}, "data.path", std::chrono::seconds(1));
  ASSERT_FALSE(val.ok());
  EXPECT_NE(val.message().find("rank 3's held-out data has as many samples as rank 0's (200)"), std::string::npos)
      << val.message();
}

TEST(DataAgreement, ARankWhoseRankZeroNeverPublishesTimesOutNamingWhat) {
  InMemoryStore store;
  const Status s = check_same_data(store, 1, {1000, "a"}, {200, "b"}, "data.path", std::chrono::milliseconds(50));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1: rank 0's data sizes"), std::string::npos) << s.message();
}

// Rank 0 could not open its data (a missing file on its node): the others waited out the
// collective timeout for its sizes and blamed a timeout; they now stop at once with its error.
TEST(DataAgreement, RankZerosFailureToOpenItsDataStopsTheOthersAtOnce) {
  InMemoryStore store;
  const Status missing(StatusCode::kNotFound, "data.path: token file 'd/train.bin': No such file or directory");
  EXPECT_EQ(share_data_failure(store, 0, missing).code(), StatusCode::kNotFound);
  const auto start = std::chrono::steady_clock::now();
  const Status s = check_same_data(store, 1, {1000, "a"}, {200, "b"}, "data.path", std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("rank 1: rank 0 could not open its data: NotFound: data.path: token file 'd/train.bin'"),
            std::string::npos)
      << s.message();
}

// The sampled digest reads each shard's first and last tokens and windows between them:
// the same contents under other names agree; one token changed in a sampled place, or
// shards in another order, do not.
TEST(DataAgreement, TheFingerprintOfTokenShardsFollowsTheirSampledContents) {
  TempDir dir;
  const int64_t n = 40000;  // more than 16 windows of 1024 tokens: the windows are spread
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 7 % 251);
  auto fingerprint = [&](const std::string& pattern) {
    Config c;  // a GPT on token windows of 4 + 1
    c.model.kind = ModelKind::kGpt;
    c.model.seq_len = 4;
    c.data.kind = DataKind::kTokens;
    c.data.path = dir.file(pattern);
    return make_source(c, Split::kTrain).value()->fingerprint();
  };
  ASSERT_TRUE(write_token_file(dir.file("a_1.bin"), tokens).ok());
  ASSERT_TRUE(write_token_file(dir.file("b_1.bin"), tokens).ok());
  const std::string same = fingerprint("a_1.bin");
  EXPECT_EQ(same.size(), 16u);
  EXPECT_EQ(fingerprint("b_1.bin"), same);
  for (const int64_t at : {int64_t{0}, n - 1, int64_t{21000}}) {  // first, last, in window 8 (20784..21807)
    std::vector<uint16_t> changed = tokens;
    changed[static_cast<size_t>(at)] ^= 1;
    ASSERT_TRUE(write_token_file(dir.file("c_1.bin"), changed).ok());
    EXPECT_NE(fingerprint("c_1.bin"), same) << "token " << at;
  }
  std::vector<uint16_t> shorter(tokens.begin(), tokens.begin() + 20000);
  ASSERT_TRUE(write_token_file(dir.file("a_2.bin"), shorter).ok());
  ASSERT_TRUE(write_token_file(dir.file("d_0.bin"), shorter).ok());
  ASSERT_TRUE(write_token_file(dir.file("d_1.bin"), tokens).ok());
  EXPECT_NE(fingerprint("a_*.bin"), fingerprint("d_*.bin"));  // the same shards, in the other order
}

}  // namespace
}  // namespace zdp::trainer
