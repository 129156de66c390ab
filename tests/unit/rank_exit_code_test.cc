// The exit codes by which a rank tells its launcher whose fault its failure was
// (zdp/launch_env.h), which dp-launch's blame reads.
#include <gtest/gtest.h>

#include "zdp/launch_env.h"

namespace zdp {
namespace {

TEST(RankExitCode, SaysWhetherTheFailureWasThisRanksOrAnothers) {
  EXPECT_EQ(rank_exit_code(Status(StatusCode::kPeerFailure, "all_reduce #4: a peer died")), kExitPeerFailed);
  EXPECT_EQ(rank_exit_code(Status(StatusCode::kAborted, "save_checkpoint: prepare: rank 0 failed")), kExitPeerFailed);
  EXPECT_EQ(rank_exit_code(Status(StatusCode::kTimeout, "all_gather #9 timed out")), kExitPeerTimeout);
  for (StatusCode own : {StatusCode::kInvalidArgument, StatusCode::kIoError, StatusCode::kOutOfMemory,
                         StatusCode::kCudaError, StatusCode::kInternal, StatusCode::kNotFound}) {
    EXPECT_EQ(rank_exit_code(Status(own, "x")), kExitFailed) << to_string(own);
  }
  // Distinct from each other, from success and from the shell's signal codes (128 + n).
  EXPECT_NE(kExitFailed, kExitPeerFailed);
  EXPECT_NE(kExitPeerFailed, kExitPeerTimeout);
  EXPECT_GT(kExitFailed, 0);
  EXPECT_LT(kExitPeerTimeout, 128);
}

}  // namespace
}  // namespace zdp
