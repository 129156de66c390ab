// Status/StatusOr semantics, the check-macro plumbing and the log/error prefixes.
#include "zdp/status.h"

#include <gtest/gtest.h>

#include "zdp/log.h"

namespace zdp {
namespace {

StatusOr<int> parse_positive(int v) {
  if (v <= 0) return Status(StatusCode::kInvalidArgument, "value " + std::to_string(v) + " is not positive");
  return v;
}

Status doubled_into(int v, int* out) {
  ZDP_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return Status::Ok();
}

Status forwards(int v) {
  int out = 0;
  ZDP_RETURN_IF_ERROR(doubled_into(v, &out));
  return out == 2 * v ? Status::Ok() : Status(StatusCode::kInternal, "wrong");
}

TEST(Status, OkAndErrorFormatting) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().to_string(), "OK");
  const Status s(StatusCode::kTimeout, "all_reduce #3 timed out");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.to_string(), "Timeout: all_reduce #3 timed out");
  EXPECT_EQ(s.with_context("rank 2").message(), "rank 2: all_reduce #3 timed out");
  EXPECT_TRUE(Status::Ok().with_context("ignored").ok());
}

TEST(Status, MacrosPropagateFirstError) {
  int out = 0;
  EXPECT_TRUE(doubled_into(21, &out).ok());
  EXPECT_EQ(out, 42);
  EXPECT_TRUE(forwards(5).ok());
  const Status err = forwards(-1);
  EXPECT_EQ(err.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(err.message(), "value -1 is not positive");
}

TEST(StatusOr, ValueOfErrorThrowsTypedError) {
  StatusOr<int> bad = parse_positive(0);
  ASSERT_FALSE(bad.ok());
  try {
    (void)bad.value();
    FAIL() << "value() of an error must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not positive"), std::string::npos);
  }
  StatusOr<std::string> moved = std::string("abc");
  EXPECT_EQ(*moved, "abc");
  EXPECT_EQ(moved->size(), 3u);
}

TEST(StatusOr, OkStatusWithoutValueIsAnInternalError) {
  StatusOr<int> s = Status::Ok();
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

TEST(Log, PrefixAndErrorSiteNameRankAndHost) {
  set_process_identity(3, 4);
  const ProcessIdentity id = process_identity();
  EXPECT_EQ(log_prefix(), "[rank 3/4 " + id.host + "]");
  const std::string site = error_site("/a/b/comm_gloo.cc", 42);
  EXPECT_EQ(site.rfind("[rank 3/4 " + id.host + ":", 0), 0u) << site;
  EXPECT_NE(site.find("] comm_gloo.cc:42"), std::string::npos) << site;
  set_process_identity(0, 1);
}

// dp-launch is no rank: its lines say what it is ("[rank 0/1 host]" read as rank 0's).
TEST(Log, AProcessRoleReplacesTheRank) {
  set_process_role("dp-launch node 1");
  const ProcessIdentity id = process_identity();
  EXPECT_EQ(log_prefix(), "[dp-launch node 1 " + id.host + "]");
  EXPECT_EQ(error_site("/a/b/x.cc", 7).rfind("[dp-launch node 1 " + id.host + ":", 0), 0u);
  set_process_role("");
  EXPECT_EQ(log_prefix(), "[rank " + std::to_string(id.rank) + "/" + std::to_string(id.world_size) + " " + id.host + "]");
}

TEST(Log, LinesCarryThePrefix) {
  set_process_identity(1, 2);
  ::testing::internal::CaptureStderr();
  ZDP_LOG(kWarn) << "bucket " << 7 << " late";
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.rfind("[rank 1/2 ", 0), 0u) << out;
  EXPECT_NE(out.find("status_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("bucket 7 late\n"), std::string::npos) << out;
  set_process_identity(0, 1);
}

TEST(Log, BelowThresholdIsNotEvaluated) {
  const LogLevel saved = log_threshold();
  set_log_threshold(LogLevel::kWarn);
  int evaluated = 0;
  auto touch = [&] { return ++evaluated; };
  ZDP_LOG(kDebug) << touch();
  EXPECT_EQ(evaluated, 0);
  set_log_threshold(saved);
}

}  // namespace
}  // namespace zdp
