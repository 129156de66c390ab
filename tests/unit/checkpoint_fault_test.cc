// The checkpoint fault hook (runtime/internal/checkpoint_fault.h): ZDP_CKPT_FAULT's syntax,
// its errors, and the exit at the named point.
#include "runtime/internal/checkpoint_fault.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace zdp {
namespace {

using ::testing::HasSubstr;

TEST(CheckpointFault, SyntaxAndErrors) {
  StatusOr<checkpoint::FaultSpec> spec = checkpoint::parse_fault("rank=3,at=commit,step=20,attempt=0");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->rank, 3);
  EXPECT_EQ(spec->at, "commit");
  EXPECT_EQ(spec->step, 20);
  EXPECT_EQ(spec->attempt, 0);
  EXPECT_THAT(checkpoint::parse_fault("rank=1,at=flush").status().message(), HasSubstr("unknown point 'flush'"));
  EXPECT_THAT(checkpoint::parse_fault("at=write").status().message(), HasSubstr("rank and at are required"));
  EXPECT_THAT(checkpoint::parse_fault("rank=x,at=write").status().message(), HasSubstr("rank = 'x' is not an integer in [0, 2147483647]"));
  // Past int's range (strtoll took it and the cast wrapped it), twice the same key (the
  // later one used to win), a pause past a day (sleep_for's nanoseconds would overflow).
  EXPECT_THAT(checkpoint::parse_fault("rank=4294967296,at=write").status().message(),
              HasSubstr("rank = '4294967296' is not an integer"));
  EXPECT_THAT(checkpoint::parse_fault("rank=0,at=write,at=commit").status().message(), HasSubstr("'at' is given twice"));
  EXPECT_THAT(checkpoint::parse_fault("rank=0,at=write,action=slow,ms=99999999999").status().message(),
              HasSubstr("ms = '99999999999' is not an integer in [0, 86400000]"));
  ::setenv("ZDP_CKPT_FAULT", "rank=0,at=write,step=3", 1);
  EXPECT_TRUE(checkpoint::fault_point("write", 0, 2).ok());   // another step: no fault
  EXPECT_TRUE(checkpoint::fault_point("commit", 0, 3).ok());  // another point
  EXPECT_TRUE(checkpoint::fault_point("write", 1, 3).ok());   // another rank
  ::setenv("ZDP_CKPT_FAULT", "rank=0,at=nowhere", 1);
  EXPECT_FALSE(checkpoint::fault_point("write", 0, 3).ok());  // a typo is an error, not silence
  ::unsetenv("ZDP_CKPT_FAULT");
  EXPECT_EXIT((::setenv("ZDP_CKPT_FAULT", "rank=0,at=write", 1), (void)checkpoint::fault_point("write", 0, 1)),
              ::testing::ExitedWithCode(checkpoint::kFaultExitCode), "exiting with code 86 at 'write'");
}

// 'commit' and 'latest' happen on the creating rank only: a fault there on another rank
// was accepted and never fired (a test that tested nothing); every other point, and
// those on the creator, stay accepted.
TEST(CheckpointFault, ACommitFaultOnARankThatDoesNotCommitIsRefused) {
  for (const char* at : {"commit", "latest"}) {
    ::setenv("ZDP_CKPT_FAULT", (std::string("rank=1,at=") + at).c_str(), 1);
    const Status refused = checkpoint::check_fault_target(1, /*creator=*/false);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << at;
    EXPECT_THAT(refused.message(), HasSubstr(std::string("rank 1 does not create checkpoints, so it never reaches '") + at));
    EXPECT_TRUE(checkpoint::check_fault_target(1, /*creator=*/true).ok()) << at;   // rank 1 creates (per node)
    EXPECT_TRUE(checkpoint::check_fault_target(2, /*creator=*/false).ok()) << at;  // another rank
  }
  ::setenv("ZDP_CKPT_FAULT", "rank=1,at=write", 1);
  EXPECT_TRUE(checkpoint::check_fault_target(1, /*creator=*/false).ok());
  ::unsetenv("ZDP_CKPT_FAULT");
  EXPECT_TRUE(checkpoint::check_fault_target(1, /*creator=*/false).ok());
}

}  // namespace
}  // namespace zdp
