// The progress records ranks keep in the job's store (runtime/internal/job_progress.h):
// they round-trip, and anything malformed or oversized is refused with the reason.
#include "runtime/internal/job_progress.h"

#include <gtest/gtest.h>

namespace zdp {
namespace {

TEST(JobProgress, RecordsRoundTrip) {
  JobProgress j{120, 400, 2.5, 12345.5, 30.25, 81.5, "eval"};
  const JobProgress back = decode_job_progress(encode_progress(j)).value();
  EXPECT_EQ(back.step, 120);
  EXPECT_EQ(back.steps, 400);
  EXPECT_DOUBLE_EQ(back.loss, 2.5);
  EXPECT_DOUBLE_EQ(back.tokens_per_s, 12345.5);
  EXPECT_DOUBLE_EQ(back.elapsed_s, 30.25);
  EXPECT_DOUBLE_EQ(back.eta_s, 81.5);
  EXPECT_EQ(back.phase, "eval");
  const RankProgress r = decode_rank_progress(encode_progress(RankProgress{7, 0.042, "train"})).value();
  EXPECT_EQ(r.step, 7);
  EXPECT_DOUBLE_EQ(r.compute_s, 0.042);
}

TEST(JobProgress, MalformedRecordsAreRefused) {
  EXPECT_NE(decode_job_progress("not json").status().message().find("not a JSON object"), std::string::npos);
  EXPECT_NE(decode_job_progress(R"({"step": 1})").status().message().find("'steps' is missing"), std::string::npos);
  EXPECT_NE(decode_rank_progress(R"({"step": "x", "compute_s": 1, "phase": "train"})").status().message().find("'step'"),
            std::string::npos);
  EXPECT_FALSE(decode_job_progress(std::string(kMaxProgressRecord + 1, ' ')).ok());
  JobProgress negative;
  negative.step = -1;
  EXPECT_FALSE(decode_job_progress(encode_progress(negative)).ok());
}

TEST(JobProgress, EtaFormat) {
  EXPECT_EQ(format_eta(42.4), "42s");
  EXPECT_EQ(format_eta(187), "3m07s");
  EXPECT_EQ(format_eta(3720), "1h02m");
  EXPECT_EQ(format_eta(-1), "?");
}

}  // namespace
}  // namespace zdp
