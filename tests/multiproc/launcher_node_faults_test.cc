// A job of two nodes (two dp-launch processes on loopback) when one node fails as a whole
// or for good: the node that is left must name the right rank, and must not restart into
// a job that cannot meet again (launch.max_restarts).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "testing/two_nodes.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using zdp::testing::Clock;
using zdp::testing::finish;
using zdp::testing::finish_both;
using zdp::testing::mlp_on_two_nodes;
using zdp::testing::TwoNodes;
using zdp::testing::LaunchRun;
using zdp::testing::Launcher;
using zdp::testing::LauncherTest;
using zdp::testing::read_file;
using zdp::testing::start;

const std::map<std::string, std::string>& kSecret = zdp::testing::kTwoNodeSecret;

// Waits (at most 60 s) until `path` holds `text`.
bool await_text(const std::string& path, const std::string& text) {
  const auto limit = Clock::now() + 60s;
  while (Clock::now() < limit) {
    if (read_file(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Node 1's machine goes down (its launcher and rank SIGKILLed): node 0's rank fails at
// once on the broken connection, and nobody posts why. Node 0 blamed its own healthy rank
// ("rank 0 (node 0, pid ...) failed"); it now waits until rank 1's heartbeat is stale and
// names rank 1.
TEST_F(LauncherTest, ANodeThatDiesWholeIsBlamedNotTheRankThatLostIt) {
  const fs::path logs = dir_ / "logs";
  auto args = [&](int node) {
    return mlp_on_two_nodes(node, logs, port_,
                            {"checkpoint.dir=\"" + (dir_ / "checkpoints").string() + "\"", "train.steps=100000",
                             "train.log_every=1"});
  };
  Launcher n0 = start(args(0), kSecret);
  Launcher n1 = start(args(1), kSecret);
  TwoNodes run = finish_both(n0, n1, 90s);
  ASSERT_TRUE(await_text((logs / "rank-0.log").string(), "step 200/")) << read_file(logs / "rank-0.log");  // heartbeats seen
  ::kill(n1.pid, SIGKILL);
  const LaunchRun r0 = run.node0.get();
  const LaunchRun r1 = run.node1.get();
  EXPECT_EQ(r1.signal, SIGKILL) << r1.output;
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_NE(r0.output.find("dp-launch: rank 1 "), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("stopped responding"), std::string::npos) << r0.output;
  EXPECT_EQ(r0.output.find("dp-launch: rank 0 (node 0"), std::string::npos) << "node 0 blamed its own rank:\n"
                                                                           << r0.output;
  EXPECT_LT(r0.seconds, 60) << r0.output;
}

// Ctrl-C on node 0 with restarts left: node 1 restarted the job into node 0's store,
// which was gone, waited 30 s for it, restarted again, and failed after about 33 s. A
// signal stops the job for good (job_keys::kJobFinal).
TEST_F(LauncherTest, ACtrlCOnOneNodeIsNotRestartedOnTheOthers) {
  const std::string cfg = config(1, {"--sleep-ms", "60000"}, "nnodes = 2\nmax_restarts = 2");
  Launcher n0 = start({cfg, "--node-rank", "0"}, kSecret);
  Launcher n1 = start({cfg, "--node-rank", "1"}, kSecret);
  TwoNodes run = finish_both(n0, n1, 60s);
  ASSERT_TRUE(await_text((dir_ / "logs" / "rank-1.log").string(), "ok (local")) << read_file(dir_ / "logs" / "rank-1.log");
  ::kill(n0.pid, SIGINT);
  const LaunchRun r0 = run.node0.get();
  const LaunchRun r1 = run.node1.get();
  EXPECT_EQ(r0.exit_code, 128 + SIGINT) << r0.output;
  EXPECT_EQ(r1.exit_code, 1) << r1.output;
  EXPECT_EQ(r1.output.find("restarting the job"), std::string::npos) << r1.output;
  EXPECT_NE(r1.output.find("not restarting (launch.max_restarts = 2): the job was stopped for good"), std::string::npos)
      << r1.output;
  EXPECT_LT(r1.seconds, 20) << r1.output;
}

// Node 0's launcher frozen (SIGSTOP: its store accepts nothing and answers nothing), then
// Ctrl-C on node 1: node 1 waited out each store call's 60 s reply timeout, reading none
// of its ranks' output, and exited after about 57 s. Its calls now give up 1 s after the
// signal (TcpStoreClient's stop), and it stops its ranks and exits.
TEST_F(LauncherTest, ACtrlCIsHeardWhileNodeZerosStoreIsFrozen) {
  const std::string cfg = config(1, {"--sleep-ms", "60000"}, "nnodes = 2\nheartbeat_timeout_s = 0");
  Launcher n0 = start({cfg, "--node-rank", "0"}, kSecret);
  Launcher n1 = start({cfg, "--node-rank", "1"}, kSecret);
  TwoNodes run = finish_both(n0, n1, 90s);
  ASSERT_TRUE(await_text((dir_ / "logs" / "rank-1.log").string(), "ok (local")) << read_file(dir_ / "logs" / "rank-1.log");
  ::kill(n0.pid, SIGSTOP);
  std::this_thread::sleep_for(500ms);
  const auto signalled = Clock::now();
  ::kill(n1.pid, SIGINT);
  const LaunchRun r1 = run.node1.get();
  const double heard_after = std::chrono::duration<double>(Clock::now() - signalled).count();
  ::kill(n0.pid, SIGCONT);
  ::kill(n0.pid, SIGTERM);
  const LaunchRun r0 = run.node0.get();
  EXPECT_EQ(r1.exit_code, 128 + SIGINT) << r1.output;
  EXPECT_LT(heard_after, 15.0) << r1.output;
  EXPECT_NE(r0.exit_code, 0) << r0.output;
}

// Node 1's launcher SIGKILLed (its machine lost): a new dp-launch for node 1 takes the
// dead one's claim over once its lease has expired, and the job, restarted by node 0,
// finishes on both nodes. The claim was held for good: the new launcher was refused
// ("node 1 has already joined") and node 0 burnt its restarts waiting for it.
TEST_F(LauncherTest, ANewLauncherTakesTheNodeOfOneThatDied) {
  const fs::path logs = dir_ / "logs";
  const auto with_node = [&](int node) {
    return mlp_on_two_nodes(node, logs, port_,
                            {"launch.max_restarts=1", "launch.startup_timeout_s=60", "checkpoint.dir=\"\"",
                             "train.steps=600", "train.log_every=100"});
  };
  Launcher n0 = start(with_node(0), kSecret);
  Launcher n1 = start(with_node(1), kSecret);
  TwoNodes run = finish_both(n0, n1, 150s);
  ASSERT_TRUE(await_text((logs / "rank-0.log").string(), "step 200/")) << read_file(logs / "rank-0.log");
  ::kill(n1.pid, SIGKILL);
  const LaunchRun replacement = finish(start(with_node(1), kSecret), 150s, Clock::now());
  const LaunchRun r0 = run.node0.get();
  EXPECT_EQ(run.node1.get().signal, SIGKILL);
  EXPECT_NE(replacement.output.find("this launcher takes its place in the job"), std::string::npos) << replacement.output;
  EXPECT_EQ(replacement.exit_code, 0) << replacement.output;
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_NE(r0.output.find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << r0.output;
}

// Node 0's rank finished (exit 0) when node 1's failed, with a restart left: node 0
// reported the failure and left, taking the store away from node 1's restarted attempt.
// Node 0 now restarts with it, and the second attempt succeeds on both.
TEST_F(LauncherTest, NodeZeroRestartsWithTheNodeThatFailedAfterItsRanksFinished) {
  const std::string cfg = config(
      1, {"-c", "test $GROUP_RANK = 0 || { sleep 3; test $ZDP_ATTEMPT = 1 || exit 3; }; : " + dir_.string()},
      "nnodes = 2\nmax_restarts = 1\nheartbeat_timeout_s = 0", "/bin/sh", 0);
  Launcher n0 = start({cfg, "--node-rank", "0"}, kSecret);
  Launcher n1 = start({cfg, "--node-rank", "1"}, kSecret);
  TwoNodes run = finish_both(n0, n1, 60s);
  const LaunchRun r0 = run.node0.get();
  const LaunchRun r1 = run.node1.get();
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_NE(r0.output.find("but another node stopped the job: rank 1 (node 1"), std::string::npos) << r0.output;
  EXPECT_NE(r0.output.find("restarting the job as attempt 1 (restart 1 of 1) (with the node that failed)"), std::string::npos)
      << r0.output;
}

// Three nodes: node 2's ranks finished (its launcher left) when node 1's failed. Node 0
// and node 1 restarted into an attempt node 2 would never join, and waited for it until
// the startup timeout. Neither restarts now.
TEST_F(LauncherTest, NoNodeRestartsAJobANodeHasLeft) {
  const std::string cfg = config(
      1, {"-c", "test $GROUP_RANK = 2 || { sleep 1; test $GROUP_RANK = 0 || exit 3; sleep 1; }; : " + dir_.string()},
      "nnodes = 3\nmax_restarts = 1\nheartbeat_timeout_s = 0", "/bin/sh", 0);
  Launcher n0 = start({cfg, "--node-rank", "0"}, kSecret);
  Launcher n1 = start({cfg, "--node-rank", "1"}, kSecret);
  Launcher n2 = start({cfg, "--node-rank", "2"}, kSecret);
  TwoNodes run = finish_both(n0, n1, 60s);
  const LaunchRun r2 = finish(n2, 60s, Clock::now());
  const LaunchRun r0 = run.node0.get();
  const LaunchRun r1 = run.node1.get();
  EXPECT_EQ(r2.exit_code, 0) << r2.output;
  for (const LaunchRun* r : {&r0, &r1}) {
    EXPECT_EQ(r->exit_code, 1) << r->output;
    EXPECT_EQ(r->output.find("restarting the job"), std::string::npos) << r->output;
    EXPECT_NE(r->output.find("not restarting: node(s) 2 finished this attempt and left the job"), std::string::npos)
        << r->output;
    EXPECT_LT(r->seconds, 30) << r->output;
  }
}

// Node 0's launcher dies and a new one starts on its address and port (a new run): node
// 1's launcher reconnected to that store, read its empty keys as its own job's, and left
// saying its claim "was taken over by another dp-launch". It now says node 0 was
// restarted, and its part of the job is over.
TEST_F(LauncherTest, ANodeWhoseNodeZeroWasRestartedSaysSo) {
  const fs::path logs = dir_ / "logs";
  const auto with_node = [&](int node) {
    return mlp_on_two_nodes(node, logs, port_,
                            {"launch.startup_timeout_s=20", "launch.max_restarts=1", "checkpoint.dir=\"\"",
                             "train.steps=100000", "train.log_every=100"});
  };
  Launcher n0 = start(with_node(0), kSecret);
  Launcher n1 = start(with_node(1), kSecret);
  TwoNodes run = finish_both(n0, n1, 150s);
  ASSERT_TRUE(await_text((logs / "rank-0.log").string(), "step ")) << read_file(logs / "rank-0.log");
  ::kill(n0.pid, SIGKILL);
  EXPECT_EQ(run.node0.get().signal, SIGKILL);
  std::this_thread::sleep_for(1s);
  Launcher restarted = start(with_node(0), kSecret);  // a new run: it waits for a node 1 that never comes
  const LaunchRun r1 = run.node1.get();
  ::kill(restarted.pid, SIGTERM);
  (void)finish(restarted, 30s, Clock::now());
  EXPECT_NE(r1.exit_code, 0) << r1.output;
  EXPECT_NE(r1.output.find("node 0's launcher was restarted, and this node's part of the job is over"),
            std::string::npos) << r1.output;
  EXPECT_EQ(r1.output.find("taken over"), std::string::npos) << r1.output;
  EXPECT_NE(r1.output.find("the job was stopped for good (lost node 0's store)"), std::string::npos) << r1.output;
}

}  // namespace
