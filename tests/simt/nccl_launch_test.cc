// dp-launch with backend "nccl" on two GPUs, as a user runs it, with the GPUs and NCCL
// emulated (dp-launch-emulated and dp-train-emulated: the tools' own sources, whose CUDA
// device count, devices and NCCL communicator are the SIMT emulation's, tests/CMakeLists.txt):
// the launcher's plan for NCCL ranks, each rank on its own device (LOCAL_RANK), the NCCL
// unique id through the TCP store between processes, and the failure paths of
// tests/faults/liveness_test.cc, which no lent machine (one GPU each) has run. The job is
// tests/faults/fault_jobs.h's MLP (14 collectives a step, #6 + 14 (s - 1) starting step s).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/faults/fault_jobs.h"

namespace zdp::testing {
namespace {

using std::chrono::seconds;

// The fault job on NCCL ranks run by the emulated tools, its exchanges in dir/nccl.
JobRun launch_nccl(const TempDir& dir, const std::vector<std::string>& sets, const std::string& test_comm = "",
                   int steps = 4, seconds limit = seconds(120)) {
  std::filesystem::create_directories(dir.path() + "/nccl");
  std::vector<std::string> argv = {ZDP_DP_LAUNCH, write_job_config(dir.path(), free_port(), steps), "--set",
                                   "launch.backend=nccl", "--set", std::string("launch.program=") + ZDP_DP_TRAIN};
  for (const std::string& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  std::map<std::string, std::string> env = {{"ZDP_EMULATED_NCCL_DIR", dir.path() + "/nccl"}};
  if (!test_comm.empty()) env["ZDP_TEST_COMM"] = test_comm;
  return run_job(argv, env, limit);
}

// Deterministic mode: two NCCL ranks (accumulating 2 micro-batches each) leave the bytes
// of one NCCL rank (accumulating 4), checkpoint by checkpoint.
TEST(NcclLaunch, TwoRanksOnTwoGpusLeaveTheBytesOfOne) {
  TempDir two, one;
  const JobRun a = launch_nccl(two, {"train.deterministic=true"});
  ASSERT_EQ(a.exit_code, 0) << a.output();
  EXPECT_TRUE(a.has("on cuda:1 (SIMT emulation) with nccl") || a.has("nccl communicator ready: rank 1/2 on cuda:1"))
      << "rank 1 was not on the second GPU:\n" << a.output();
  const JobRun b = launch_nccl(one, {"train.deterministic=true", "launch.nproc_per_node=1"});
  ASSERT_EQ(b.exit_code, 0) << b.output();
  for (int step = 1; step <= 4; ++step) {
    const std::string s = "/ckpt/step-" + std::to_string(step);
    EXPECT_TRUE(same_checkpoint(two.path() + s, one.path() + s)) << "step " << step;
  }
}

// Two nodes of one GPU each (two dp-launch on this host, --node-rank 0 and 1, node 0's
// store on 127.0.0.1), NCCL between them: the bytes of one node with two GPUs.
TEST(NcclLaunch, TwoNodesOfOneGpuLeaveTheBytesOfOneNodeWithTwo) {
  TempDir nodes, one_node;
  std::filesystem::create_directories(nodes.path() + "/nccl");
  const std::string config =
      write_job_config(nodes.path(), free_port(), 4, "nnodes = 2\nmaster_addr = \"127.0.0.1\"\n");
  std::vector<Job> jobs;
  for (int node : {0, 1}) {
    jobs.push_back(start_job({ZDP_DP_LAUNCH, config, "--node-rank", std::to_string(node), "--set", "launch.backend=nccl",
                              "--set", std::string("launch.program=") + ZDP_DP_TRAIN, "--set",
                              "launch.nproc_per_node=1", "--set", "train.deterministic=true"},
                             {{"ZDP_EMULATED_NCCL_DIR", nodes.path() + "/nccl"},
                              {"ZDP_JOB_SECRET", "0123456789abcdef0123456789abcdef"}}));
  }
  const JobRun node0 = finish_job(jobs[0], seconds(120));
  const JobRun node1 = finish_job(jobs[1], seconds(120));
  ASSERT_EQ(node0.exit_code, 0) << node0.output() << "\n--- node 1:\n" << node1.output();
  ASSERT_EQ(node1.exit_code, 0) << node1.output();
  EXPECT_TRUE(node1.has("nccl communicator ready: rank 1/2")) << node1.output();
  const JobRun one = launch_nccl(one_node, {"train.deterministic=true"});
  ASSERT_EQ(one.exit_code, 0) << one.output();
  for (int step = 1; step <= 4; ++step) {
    const std::string s = "/ckpt/step-" + std::to_string(step);
    EXPECT_TRUE(same_checkpoint(nodes.path() + s, one_node.path() + s)) << "step " << step;
  }
}

// A rank stopped (SIGSTOP) inside a collective: the healthy NCCL rank's watchdog times out
// after 5 s, and dp-launch names the stopped rank, not the one that timed out.
TEST(NcclLaunch, AStoppedRankIsNamedAndTheHealthyPeerIsNotBlamed) {
  TempDir dir;
  const JobRun run = launch_nccl(dir, {"launch.collective_timeout_s=5", "launch.heartbeat_timeout_s=60"},
                                 "rank=0,seq=" + std::to_string(first_of_step(2)) + ",action=stop", 30);
  expect_stopped_rank_0_named(run);
  const std::string out = run.output();
  EXPECT_TRUE(run.has("nccl reduce_scatter #")) << "rank 1's timeout names no NCCL collective:\n" << out;
  EXPECT_LT(run.seconds, 60.0);
}

// A rank killed (SIGKILL) right after issuing a collective: dp-launch names it and stops
// the NCCL peer waiting in that collective; the job ends, it does not hang.
TEST(NcclLaunch, AKilledRankStopsTheJobNamingIt) {
  TempDir dir;
  const JobRun run = launch_nccl(dir, {"launch.collective_timeout_s=60"},
                                 "rank=1,seq=" + std::to_string(first_of_step(2) + 1) + ",action=kill", 30);
  EXPECT_EQ(run.exit_code, 1);
  const std::string out = run.output();
  EXPECT_TRUE(run.has("dp-launch: rank 1 (node 0, pid")) << out;
  EXPECT_TRUE(run.has("failed: killed by signal 9 (SIGKILL); stopping the other 1 local rank(s)")) << out;
  EXPECT_FALSE(run.has("dp-launch: rank 0 (node 0, pid")) << "the healthy rank was blamed:\n" << out;
  EXPECT_LT(run.seconds, 60.0) << out;
}

}  // namespace
}  // namespace zdp::testing
