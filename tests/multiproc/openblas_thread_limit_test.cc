// OMP_THREAD_LIMIT below a rank's OpenBLAS thread count. OpenBLAS's OpenMP build runs a
// threaded GEMM as a team whose members busy-wait for each other; the limit kept the team
// at one thread and the rank spun forever at 100% CPU in its first GEMM (found by
// scripts/sanitize.sh tsan, which sets OMP_THREAD_LIMIT=1). The CPU GEMM now caps
// OpenBLAS's threads at the limit, and the job trains to the end.
#include <gtest/gtest.h>

#include <string>

#include "testing/free_port.h"
#include "testing/run_command.h"
#include "testing/temp_dir.h"

namespace zdp {
namespace {

TEST(OpenBlasThreadLimit, AnOpenMpThreadLimitBelowOpenBlasThreadsDoesNotHang) {
  testing::TempDir dir;
  const std::string sets[] = {"launch.nproc_per_node=1", "launch.env.OPENBLAS_NUM_THREADS=2", "model.d_model=256",
                              "train.global_batch=64", "train.micro_batch=8", "train.steps=3",
                              "checkpoint.every_steps=0", "checkpoint.dir=" + dir.path() + "/checkpoints",
                              "launch.log_dir=" + dir.path() + "/logs", "launch.program=" + std::string(ZDP_DP_TRAIN),
                              "launch.master_port=" + std::to_string(testing::free_port())};
  std::string cmd = "OMP_THREAD_LIMIT=1 timeout 120 " + std::string(ZDP_DP_LAUNCH) + " " + ZDP_SOURCE_DIR +
                    "/configs/mlp-cpu.toml";
  for (const std::string& s : sets) cmd += " --set " + s;
  const testing::CommandRun r = testing::run_command(cmd);
  EXPECT_NE(r.exit_code, 124) << "the job hung (killed by timeout after 120 s)\n" << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all 1 ranks exited 0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace zdp
