// train.deterministic across nodes whose CPUs make OpenBLAS pick other kernels
// (trainer/loop/same_arithmetic.h): a DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU
// (or OPENBLAS_CORETYPE), and kernels for different cores round differently: such a job
// exited 0 with bits that neither node alone gives. Now refused at the start, naming both.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "testing/two_nodes.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using zdp::testing::finish_both;
using zdp::testing::LaunchRun;
using zdp::testing::LauncherTest;
using zdp::testing::mlp_on_two_nodes;
using zdp::testing::read_file;
using zdp::testing::start;
using zdp::testing::TwoNodes;

const std::map<std::string, std::string>& kSecret = zdp::testing::kTwoNodeSecret;

// Node n's OpenBLAS core set by OPENBLAS_CORETYPE (kernels every x86-64 CPU of the last
// 15 years runs); two deterministic 20-step runs of the mlp, one rank a node.
struct Runs {
  LaunchRun node0, node1;
  std::string rank1_log;
};
Runs run(const fs::path& dir, int port, const std::string& core0, const std::string& core1) {
  const fs::path logs = dir / ("logs-" + core0 + "-" + core1);
  auto args = [&](int node, const std::string& core) {
    return mlp_on_two_nodes(node, logs, port,
                            {"train.deterministic=true", "train.steps=20", "checkpoint.resume=\"never\"",
                             "checkpoint.dir=\"" + (dir / "checkpoints").string() + "\"",
                             "launch.env.OPENBLAS_CORETYPE=\"" + core + "\""});
  };
  TwoNodes both = finish_both(start(args(0, core0), kSecret), start(args(1, core1), kSecret), 120s);
  Runs r{both.node0.get(), both.node1.get(), ""};
  r.rank1_log = read_file(logs / "rank-1.log");
  return r;
}

TEST_F(LauncherTest, DeterministicRanksOnOtherOpenBlasKernelsAreRefusedNamingBoth) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the OpenBLAS core names used here are x86-64's";
#endif
  const Runs same = run(dir_, port_, "Nehalem", "Nehalem");
  ASSERT_EQ(same.node0.exit_code, 0) << same.node0.output;
  ASSERT_EQ(same.node1.exit_code, 0) << same.node1.output;
  ASSERT_NE(same.node0.output.find("every rank computes with"), std::string::npos) << same.node0.output;
  if (same.node0.output.find("DYNAMIC_ARCH") == std::string::npos) {
    GTEST_SKIP() << "this OpenBLAS is built for one core: OPENBLAS_CORETYPE chooses nothing";
  }
  EXPECT_NE(same.node0.output.find("core Nehalem"), std::string::npos) << same.node0.output;

  port_ = zdp::testing::free_port();
  const Runs mixed = run(dir_, port_, "Prescott", "Nehalem");
  EXPECT_NE(mixed.node1.exit_code, 0) << mixed.node1.output;
  EXPECT_NE(mixed.node0.exit_code, 0) << mixed.node0.output;
  EXPECT_NE(mixed.rank1_log.find("rank 1 computes with"), std::string::npos) << mixed.rank1_log;
  EXPECT_NE(mixed.rank1_log.find("core Nehalem, rank 0 with"), std::string::npos) << mixed.rank1_log;
  EXPECT_NE(mixed.rank1_log.find("core Prescott"), std::string::npos) << mixed.rank1_log;
  EXPECT_NE(mixed.rank1_log.find("OPENBLAS_CORETYPE"), std::string::npos) << mixed.rank1_log;
}

}  // namespace
