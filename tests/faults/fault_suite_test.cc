// The fault suite: a 2-rank dp-launch job is killed (SIGKILL), stopped (SIGSTOP), slowed
// down or has its connections dropped on one rank, at a random step and in a random
// phase: before the forward pass, inside a collective, before the optimizer step, after
// the step, or while writing a checkpoint. Each run must end with the expected report
// within its bound, and nothing may be lost: the newest checkpoint verifies, and
// resuming from it ends byte-identical to a run that was never interrupted. The seed is
// printed (ZDP_TEST_SEED reproduces a run); each action is tried in two phases.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "testing/test_random.h"
#include "tests/faults/fault_jobs.h"

namespace zdp::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr int kSteps = 6;
const std::vector<std::string> kPhases = {"forward", "collective", "optimizer", "after_step", "checkpoint"};

struct Fault {
  std::string action;  // kill | stop | slow | drop
  std::string phase;
  int rank = 0;
  int step = 1;
  uint64_t seq = 0;  // collective phase (and a dropped checkpoint)

  std::string describe() const {
    return action + " rank " + std::to_string(rank) + " in step " + std::to_string(step) + " at " + phase +
           (seq ? " (collective #" + std::to_string(seq) + ")" : "");
  }
  // The variable that injects it, and the line the rank prints when it acts.
  std::map<std::string, std::string> env() const {
    const std::string common = "rank=" + std::to_string(rank) + ",";
    const std::string how = "action=" + action + (action == "slow" ? ",ms=2500" : "");
    if (seq != 0) return {{"ZDP_TEST_COMM", common + "seq=" + std::to_string(seq) + "," + how}};
    if (phase == "checkpoint") {
      return {{"ZDP_CKPT_FAULT", common + "at=write,step=" + std::to_string(step) + "," + how}};
    }
    return {{"ZDP_TRAIN_FAULT", common + "step=" + std::to_string(step) + ",phase=" + phase + "," + how}};
  }
  std::string acted() const {
    if (seq != 0) return "ZDP_TEST_COMM: " + action;
    return phase == "checkpoint" ? "ZDP_CKPT_FAULT: " + action : std::string("ZDP_TRAIN_FAULT: ");
  }
};

class FaultSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = new TempDir;
    const JobRun ref = run_job(launch_args(*reference_));
    ASSERT_EQ(ref.exit_code, 0) << ref.output();
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  static std::vector<std::string> launch_args(const TempDir& dir) {
    return {ZDP_DP_LAUNCH, write_job_config(dir.path(), free_port(), kSteps, "heartbeat_timeout_s = 2\n")};
  }
  static fs::path last_step(const TempDir& dir) { return fs::path(dir.path()) / "ckpt" / ("step-" + std::to_string(kSteps)); }

  Fault draw(const std::string& action, const std::string& phase) {
    Fault f;
    f.action = action;
    f.phase = phase;
    f.rank = static_cast<int>(random_.integer(0, 1));
    f.step = static_cast<int>(random_.integer(2, kSteps - 1));
    if (phase == "collective") f.seq = first_of_step(f.step) + static_cast<uint64_t>(random_.integer(0, 7));
    // The checkpoint write has no communicator of its own to drop: drop inside one of
    // the save's collectives instead.
    if (phase == "checkpoint" && action == "drop") f.seq = first_of_step(f.step) + 8 + static_cast<uint64_t>(random_.integer(0, kSaveCollectives - 1));
    return f;
  }

  // Runs the job with `f`, checks the report and its delay, then that nothing was lost.
  void run_fault(const Fault& f) {
    SCOPED_TRACE(f.describe() + " (" + random_.trace() + ")");
    std::printf("fault: %s\n", f.describe().c_str());
    TempDir dir;
    const JobRun run = run_job(launch_args(dir), f.env(), seconds(90));
    const std::string out = run.output();
    const double acted = run.when(f.acted());
    ASSERT_GE(acted, 0) << "the fault never fired:\n" << out;
    const std::string who = "rank " + std::to_string(f.rank) + " (";
    if (f.action == "slow") {
      EXPECT_EQ(run.exit_code, 0) << out;
      EXPECT_TRUE(run.has("dp-launch: warning: " + who)) << out;
      EXPECT_TRUE(same_checkpoint(last_step(*reference_), last_step(dir)));
      return;
    }
    EXPECT_EQ(run.exit_code, 1) << out;
    // Where the report must be, and what it must say: a kill names the rank and the
    // signal; a stop names the rank once its heartbeat (2 s) times out; a drop between
    // collectives names the rank that dropped (it gave up on its own: aborted_here; both
    // exited "because another rank failed" and the first to exit was blamed). A drop while
    // its collectives run (f.seq) may leave one of Gloo's own (an all-reduce, an all-gather)
    // blocked until its timeout, past the launcher's wait for the rank at fault: then its
    // peer, whichever exits first.
    double reported = -1;
    const double bound = 10;
    if (f.action == "kill") {
      reported = run.when("dp-launch: " + who + "node 0, pid");
      EXPECT_TRUE(run.has("killed by signal 9")) << out;
    } else if (f.action == "stop") {
      reported = run.when("stopped responding");
      EXPECT_TRUE(run.has("dp-launch: " + who + "pid")) << out;
    } else {
      reported = run.when(f.seq == 0 ? "dp-launch: " + who + "node 0, pid" : std::string("dp-launch: rank "));
      EXPECT_TRUE(run.has("connections were dropped")) << out;
    }
    ASSERT_GE(reported, 0) << out;
    // The survivor's own error is the failure it saw (a peer failure, a timeout), not an
    // Internal error that only follows from it (a model finding no gradient view).
    EXPECT_FALSE(run.has("Internal:")) << out;
    std::printf("  reported %.2f s after the fault\n", reported - acted);
    EXPECT_LT(reported - acted, bound) << out;

    // Nothing lost: the newest checkpoint verifies and resumes bit for bit.
    const JobRun verify = run_job({ZDP_DP_CKPT, "verify", dir.path() + "/ckpt"});
    EXPECT_EQ(verify.exit_code, 0) << verify.output();
    const JobRun resumed = run_job(launch_args(dir));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output();
    EXPECT_TRUE(resumed.has("resumed from")) << resumed.output();
    EXPECT_TRUE(same_checkpoint(last_step(*reference_), last_step(dir)));
  }

  void run_action(const std::string& action) {
    std::vector<std::string> phases = kPhases;
    std::shuffle(phases.begin(), phases.end(), random_.engine());
    for (int i = 0; i < 2; ++i) run_fault(draw(action, phases[static_cast<size_t>(i)]));
  }

  static TempDir* reference_;
  TestRandom random_;
};

TempDir* FaultSuite::reference_ = nullptr;

TEST_F(FaultSuite, Kill) { run_action("kill"); }
TEST_F(FaultSuite, Stop) { run_action("stop"); }
TEST_F(FaultSuite, Slow) { run_action("slow"); }
TEST_F(FaultSuite, DropConnections) { run_action("drop"); }

}  // namespace
}  // namespace zdp::testing
