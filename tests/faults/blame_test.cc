// Whom dp-launch blames when ranks fail together (3 dp-train ranks): the rank at fault,
// not the first of its peers to exit. Ranks say whose fault their failure was by their
// exit code (zdp/launch_env.h: 1 their own, 3 another rank failed, 4 timed out waiting).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/faults/fault_jobs.h"

namespace zdp::testing {
namespace {

using std::chrono::seconds;

JobRun launch3(const TempDir& dir, const std::string& train_fault) {
  return run_job({ZDP_DP_LAUNCH, write_job_config(dir.path(), free_port(), 30), "--set", "launch.nproc_per_node=3",
                  "--set", "train.global_batch=24"},
                 {{"ZDP_TRAIN_FAULT", train_fault}}, seconds(90));
}

// dp-launch's line that names the cause, of a job that failed (exit 1) blaming the rank
// its line starts with (`start`, after "dp-launch: ").
std::string blamed(const JobRun& run, const std::string& start) {
  EXPECT_EQ(run.exit_code, 1) << run.output();
  const std::string out = run.output();
  const size_t at = out.find("dp-launch: rank ");
  const std::string line = at == std::string::npos ? out : out.substr(at, out.find('\n', at) - at);
  EXPECT_EQ(line.rfind("dp-launch: " + start, 0), 0u) << out;
  return line;
}

// Rank 2 exits 1 on its own; ranks 0 and 1 lose their connections to it and exit 3. The
// launcher blamed whichever exited first, and its heartbeat comparison then named a
// healthy rank as "alive but had not reached" the collective.
TEST(Blame, ARankThatFailsOnItsOwnIsBlamedNotThePeersItTookDown) {
  TempDir dir;
  const JobRun run = launch3(dir, "rank=2,step=3,action=fail");
  const std::string line = blamed(run, "rank 2 (node 0, pid");
  EXPECT_NE(line.find("failed: exit code 1"), std::string::npos) << line;
  EXPECT_EQ(line.find("had not reached"), std::string::npos) << line;
}

// Rank 1 exits 0 in the middle of the job (as a wrapper script that lost dp-train's exit
// status): its peers fail, and the rank that left is named, not them.
TEST(Blame, ARankThatExitsZeroMidJobIsNamed) {
  TempDir dir;
  const JobRun run = launch3(dir, "rank=1,step=3,action=exit0");
  const std::string line = blamed(run, "rank 1 (");
  EXPECT_NE(line.find("exited 0 in the middle of the job, without ending its zdp context"), std::string::npos)
      << line;
  EXPECT_NE(line.find("exit code 3 (it stopped because another rank failed) (most likely because of it)"),
            std::string::npos)
      << line;
}

// Rank 1's program exits 0 before zdp::init (a wrapper that ran nothing): the others,
// joined, waited for it until startup_timeout_s (30 s here, 120 by default) and the
// reason said only that it "never reached the job store".
TEST(Blame, ARankThatExitsZeroBeforeJoiningStopsTheJobAtOnce) {
  TempDir dir;
  const std::string wrapper = dir.path() + "/rank.sh";
  std::ofstream(wrapper) << "#!/bin/sh\n[ \"$RANK\" = 1 ] && exit 0\nexec " << ZDP_DP_TRAIN << " \"$@\"\n";
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);
  const JobRun run = run_job({ZDP_DP_LAUNCH, write_job_config(dir.path(), free_port(), 30), "--set",
                              "launch.program=" + wrapper},
                             {}, seconds(90));
  EXPECT_EQ(run.exit_code, 1) << run.output();
  EXPECT_TRUE(run.has("dp-launch: rank 1 (node 0) exited 0 before it joined the job")) << run.output();
  EXPECT_LT(run.seconds, 10.0) << run.output();
}

// The same across nodes: two launchers of one rank each on this host (--node-rank 0 and
// 1). Node 1's rank ends mid-job with exit code 0, or before it joined: node 1 reported
// success while node 0 blamed its healthy rank, or waited for the startup deadline.
struct TwoNodes {
  JobRun node0, node1;
};
TwoNodes two_nodes(const TempDir& dir, const std::map<std::string, std::string>& env,
                   const std::vector<std::string>& extra = {}) {
  const std::string config = write_job_config(dir.path(), free_port(), 30);
  auto argv = [&](int node) {
    std::vector<std::string> a = {ZDP_DP_LAUNCH, config, "--node-rank", std::to_string(node), "--set",
                                  "launch.nproc_per_node=1", "--set", "launch.nnodes=2", "--set",
                                  "launch.log_dir=" + dir.path() + "/logs-" + std::to_string(node)};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::map<std::string, std::string> with_secret = env;
  with_secret["ZDP_JOB_SECRET"] = "0123456789abcdef0123";
  Job n0 = start_job(argv(0), with_secret), n1 = start_job(argv(1), with_secret);
  TwoNodes out;
  out.node1 = finish_job(n1, seconds(90));
  out.node0 = finish_job(n0, seconds(90));
  return out;
}

TEST(Blame, ARankThatExitsZeroMidJobOnAnotherNodeIsNamed) {
  TempDir dir;
  const TwoNodes run = two_nodes(dir, {{"ZDP_TRAIN_FAULT", "rank=1,step=3,action=exit0"}});
  const std::string line = blamed(run.node0, "rank 1 (");
  EXPECT_NE(line.find("exited 0 in the middle of the job"), std::string::npos) << line;
}

TEST(Blame, ARankThatExitsZeroBeforeJoiningStopsItsNodeAtOnce) {
  TempDir dir;
  const std::string wrapper = dir.path() + "/rank.sh";
  std::ofstream(wrapper) << "#!/bin/sh\n[ \"$RANK\" = 1 ] && exit 0\nexec " << ZDP_DP_TRAIN << " \"$@\"\n";
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);
  const TwoNodes run = two_nodes(dir, {}, {"--set", "launch.program=" + wrapper});
  EXPECT_EQ(run.node1.exit_code, 1) << run.node1.output();
  EXPECT_TRUE(run.node1.has("rank 1 (node 1) exited 0 before it joined the job")) << run.node1.output();
  EXPECT_EQ(run.node0.exit_code, 1) << run.node0.output();
  EXPECT_LT(run.node0.seconds, 15.0) << run.node0.output();
}

// A program that is not zdp's (it never reaches the job's store) exits 3 for its own
// reasons: its code means nothing to the launcher, which blamed the rank that exited 1
// later and described the 3 as "it stopped because another rank failed".
TEST(Blame, AnotherProgramsExitCodesMeanNothingToTheLauncher) {
  TempDir dir;
  const std::string program = dir.path() + "/rank.sh";
  std::ofstream(program) << "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then sleep 0.3; exit 3; fi\nsleep 1; exit 1\n";
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  const JobRun run = run_job({ZDP_DP_LAUNCH, write_job_config(dir.path(), free_port(), 30), "--set",
                              "launch.program=" + program, "--set", "launch.startup_timeout_s=0"},
                             {}, seconds(60));
  const std::string line = blamed(run, "rank 1 (node 0, pid");
  EXPECT_NE(line.find("failed: exit code 3;"), std::string::npos) << line;
}

}  // namespace
}  // namespace zdp::testing
