// Which launchers join a multi-node job (launcher/node_claim.h): two dp-launch processes
// with one node rank, and nodes whose layouts or settings differ, on loopback.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "testing/launcher_harness.h"

namespace {

using namespace std::chrono_literals;
using zdp::testing::Clock;
using zdp::testing::finish;
using zdp::testing::LaunchRun;
using zdp::testing::Launcher;
using zdp::testing::LauncherTest;
using zdp::testing::start;

const std::map<std::string, std::string> kSecret = {{"ZDP_JOB_SECRET", "test-secret-00042"}};

// A second launcher with node rank 1 is refused at once; the job of the first finishes.
// (It hung in rendezvous for 35 s and then blamed node 0's store.) The refused one leaves
// the running node's resolved config alone (it overwrote it, and the job's next restart
// trained with its settings); so does a second node 0 refused for the port.
TEST_F(LauncherTest, ASecondLauncherOfOneNodeRankIsRefused) {
  // Ranks that sleep past the twins' refusals (node 1's twin waits out the live lease, 5 s).
  const std::string cfg = config(2, {"--sleep-ms", "12000"}, "nnodes = 2");
  const auto t0 = Clock::now();
  Launcher node0 = start({cfg, "--node-rank", "0"}, kSecret);
  Launcher node1 = start({cfg, "--node-rank", "1"}, kSecret);
  std::this_thread::sleep_for(1500ms);  // node 1 has claimed its rank
  const auto t1 = Clock::now();
  const std::string resolved = zdp::testing::read_file((dir_ / "logs" / "config.node-1.toml").string());
  const std::string resolved0 = zdp::testing::read_file((dir_ / "logs" / "config.node-0.toml").string());
  ASSERT_NE(resolved.find("seed"), std::string::npos) << resolved;
  // Another setting of its own (a per-node key: a job-wide one is refused before the claim).
  const LaunchRun twin = finish(start({cfg, "--node-rank", "1", "--set", "launch.env.ZDP_TWIN=1"}, kSecret), 30s, t1);
  EXPECT_EQ(twin.exit_code, 2) << twin.output;
  EXPECT_EQ(zdp::testing::read_file((dir_ / "logs" / "config.node-1.toml").string()), resolved);
  const LaunchRun twin0 = finish(start({cfg, "--node-rank", "0", "--set", "train.seed=999"}, kSecret), 30s, t1);
  EXPECT_EQ(twin0.exit_code, 2) << twin0.output;
  EXPECT_EQ(zdp::testing::read_file((dir_ / "logs" / "config.node-0.toml").string()), resolved0);
  EXPECT_NE(twin.output.find("node 1 has already joined the job whose store is at"), std::string::npos) << twin.output;
  EXPECT_LT(twin.seconds, 10.0);
  const LaunchRun r0 = finish(node0, 60s, t0), r1 = finish(node1, 60s, t0);
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
}

// A node whose config plans another layout is refused naming both layouts.
TEST_F(LauncherTest, ANodeWithAnotherLayoutIsRefusedNamingBoth) {
  const auto t0 = Clock::now();
  Launcher node0 = start({config(2, {"--sleep-ms", "60000"}, "nnodes = 2"), "--node-rank", "0"}, kSecret);
  const LaunchRun node1 = finish(start({config(1, {}, "nnodes = 2"), "--node-rank", "1"}, kSecret), 30s, Clock::now());
  EXPECT_EQ(node1.exit_code, 2) << node1.output;
  EXPECT_NE(node1.output.find("node 1: this launcher plans 2 node(s) x 1 rank(s) = 2 ranks"), std::string::npos)
      << node1.output;
  EXPECT_NE(node1.output.find("node 0's plans 2 node(s) x 2 rank(s) = 4 ranks"), std::string::npos) << node1.output;
  ::kill(node0.pid, SIGTERM);
  const LaunchRun r0 = finish(node0, 30s, t0);
  EXPECT_NE(r0.exit_code, 0) << r0.output;
}

// A node whose copy of the config differs in a setting every node must share (here the
// evaluation interval: its ranks would evaluate while node 0's train, and the job hung in
// mismatched collectives until the collective timeout) is refused before any rank starts,
// naming the key, both values and where this node set it; per-node keys may differ.
TEST_F(LauncherTest, ANodeWhoseConfigDiffersIsRefusedNamingTheKey) {
  const std::string cfg = config(2, {"--sleep-ms", "60000"}, "nnodes = 2");
  const auto t0 = Clock::now();
  Launcher node0 = start({cfg, "--node-rank", "0"}, kSecret);
  const LaunchRun node1 =
      finish(start({cfg, "--node-rank", "1", "--set", "train.eval_every=7", "--set", "launch.rank_addr=127.0.0.1"},
                   kSecret),
             30s, Clock::now());
  EXPECT_EQ(node1.exit_code, 2) << node1.output;
  EXPECT_NE(node1.output.find("node 1: this node's config differs from node 0's in settings every node must share: "
                              "train.eval_every = 7 here (--set train.eval_every=7), 0 on node 0"),
            std::string::npos)
      << node1.output;
  EXPECT_EQ(node1.output.find("rank_addr"), std::string::npos) << node1.output;
  ::kill(node0.pid, SIGTERM);
  const LaunchRun r0 = finish(node0, 30s, t0);
  EXPECT_NE(r0.exit_code, 0) << r0.output;
}

// Node 0 alone: the startup timeout names the node whose launcher never joined, besides
// its ranks (it named the ranks only).
TEST_F(LauncherTest, TheStartupTimeoutNamesANodeWhoseLauncherNeverJoined) {
  const std::string cfg = config(2, {}, "nnodes = 2", ZDP_RANK_PROBE, 3);
  const LaunchRun node0 = finish(start({cfg, "--node-rank", "0"}, kSecret), 60s, Clock::now());
  EXPECT_NE(node0.exit_code, 0) << node0.output;
  EXPECT_NE(node0.output.find("rank(s) 2, 3 never reached the job store"), std::string::npos) << node0.output;
  EXPECT_NE(node0.output.find("the launcher of node(s) 1 never joined"), std::string::npos) << node0.output;
  // Node 0's own ranks came: the hint for programs without zdp::init is not its to give.
  EXPECT_EQ(node0.output.find("needs launch.startup_timeout_s = 0"), std::string::npos) << node0.output;
}

}  // namespace
