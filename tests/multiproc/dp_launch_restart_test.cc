// Restarts through dp-launch (launch.max_restarts), end to end on real rank processes
// (CPU, Gloo): a rank killed mid-training, or during a save, restarts the job, which
// resumes from `latest` and ends bit for bit where the uninterrupted job ends; a restart
// continues the run from its own newest checkpoint whatever checkpoint.resume says, and
// never from another run's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "testing/checkpoint_tensors.h"
#include "testing/free_port.h"
#include "testing/run_command.h"

namespace zdp::trainer {
namespace {

namespace fs = std::filesystem;
using testing::bitwise_equal;
using testing::CommandRun;
using testing::max_difference;
using testing::read_tensors;
using testing::run_command;
using testing::Tensors;

// ---- Through dp-launch: restarts resume from `latest`.

class DpLaunchRestart : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("zdp_ckpt_restart_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    clean_ = new CommandRun(launch("clean", ""));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete clean_;
  }
  // A 2-rank dp-launch job of the test mlp: 20 steps, a checkpoint every 5 under
  // <dir>/<name>, one restart allowed, `env` as the ranks' extra environment (TOML),
  // `extra` after dp-launch's other arguments.
  static CommandRun launch(const std::string& name, const std::string& env, const std::string& extra = "") {
    const fs::path config = *dir_ / (name + ".toml");
    std::ofstream(config) << "[launch]\nnproc_per_node = 2\nmax_restarts = 1\nenv = { " << env << " }\n"
                          << "[model]\nkind = \"mlp\"\nn_layers = 2\nd_model = 32\nvocab_size = 10\n"
                          << "[train]\nglobal_batch = 16\nmicro_batch = 2\nsteps = 20\nlog_every = 1000\n"
                          << "deterministic = true\n"
                          << "[optim]\nlr = 1e-2\nschedule = \"cosine\"\nwarmup_steps = 3\nmin_lr = 1e-3\n"
                          << "[zero]\nstage = 2\nbucket_mb = 0.01\n"
                          << "[checkpoint]\ndir = \"" << (*dir_ / name).string() << "\"\nevery_steps = 5\n";
    return run_command(std::string(ZDP_DP_LAUNCH) + " " + config.string() + " --set launch.log_dir=" +
                       (*dir_ / (name + "-logs")).string() + " --set launch.master_port=" +
                       std::to_string(zdp::testing::free_port()) +
                       " --set launch.program=" + ZDP_DP_TRAIN + extra);
  }
  static Tensors final_model(const std::string& name) {
    return read_tensors((*dir_ / name / "step-20" / "model.safetensors").string());
  }
  static fs::path* dir_;
  static CommandRun* clean_;
};

fs::path* DpLaunchRestart::dir_ = nullptr;
CommandRun* DpLaunchRestart::clean_ = nullptr;

TEST_F(DpLaunchRestart, AKilledRankRestartsTheJobWhichResumesFromLatest) {
  ASSERT_EQ(clean_->exit_code, 0) << clean_->output;
  const CommandRun r = launch("killed", "ZDP_TRAIN_FAULT = \"rank=1,step=13,attempt=0\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("killing this rank after step 13"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << r.output;
  // The same attempt number in the rank's log (the console said "attempt 2 of 2" for it).
  std::ifstream log(*dir_ / "killed-logs" / "rank-1.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("=== attempt 1 ==="), std::string::npos) << text;
  EXPECT_NE(r.output.find("checkpoint: resumed from " + (*dir_ / "killed" / "step-10").string()), std::string::npos)
      << r.output;
  EXPECT_TRUE(bitwise_equal(final_model("killed"), final_model("clean")))
      << "largest difference " << max_difference(final_model("killed"), final_model("clean"));
}

// ZDP_CKPT_FAULT (zdp/checkpoint.h) kills rank 1 after it wrote its part of step 10 and
// before anything was committed: the restarted job finds step-5 as the newest complete
// checkpoint, ignores the half-written step-10.tmp, and still ends where the clean run ends.
TEST_F(DpLaunchRestart, ARankKilledDuringASaveLeavesThePreviousCheckpointToResumeFrom) {
  ASSERT_EQ(clean_->exit_code, 0) << clean_->output;
  const CommandRun r = launch("in-save", "ZDP_CKPT_FAULT = \"rank=1,at=write,step=10,attempt=0\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("checkpoint: resumed from " + (*dir_ / "in-save" / "step-5").string()), std::string::npos)
      << r.output;
  EXPECT_TRUE(bitwise_equal(final_model("in-save"), final_model("clean")))
      << "largest difference " << max_difference(final_model("in-save"), final_model("clean"));
}

// checkpoint.resume = "never" or a path says where the first attempt starts; a restart
// continues the run from its own newest checkpoint. "never" restarted from step 0 (and its
// saves replaced the run's), and a path went back to where the first attempt began (and
// failed once keep_last had pruned it, in a run that saves into the path's folder).
TEST_F(DpLaunchRestart, ARestartContinuesTheRunWhateverCheckpointResumeSays) {
  ASSERT_EQ(clean_->exit_code, 0) << clean_->output;
  const std::string fault = "ZDP_TRAIN_FAULT = \"rank=1,step=13,attempt=0\"";
  const CommandRun never = launch("never", fault, " --set checkpoint.resume=never");
  ASSERT_EQ(never.exit_code, 0) << never.output;
  EXPECT_NE(never.output.find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << never.output;
  EXPECT_NE(never.output.find("checkpoint: resumed from " + (*dir_ / "never" / "step-10").string()), std::string::npos)
      << never.output;
  EXPECT_NE(never.output.find("continues this run from its newest checkpoint, not checkpoint.resume = \"never\""),
            std::string::npos) << never.output;
  EXPECT_TRUE(bitwise_equal(final_model("never"), final_model("clean")));
  // From the clean run's step 15, to step 40: the restart resumes from this run's step 30.
  const std::string from = (*dir_ / "clean" / "step-15").string();
  const CommandRun path = launch("path", "ZDP_TRAIN_FAULT = \"rank=1,step=32,attempt=0\"",
                                 " --set train.steps=40 --set checkpoint.resume=" + from);
  ASSERT_EQ(path.exit_code, 0) << path.output;
  EXPECT_NE(path.output.find("checkpoint: resumed from " + from), std::string::npos) << path.output;
  EXPECT_NE(path.output.find("checkpoint: resumed from " + (*dir_ / "path" / "step-30").string()), std::string::npos)
      << path.output;
}

// A run that fails before its first save restarts as checkpoint.resume says: with "never",
// from step 0, not from another run's checkpoint in the same folder.
TEST_F(DpLaunchRestart, ARestartBeforeTheRunsFirstSaveNeverTakesAnotherRunsCheckpoint) {
  ASSERT_EQ(clean_->exit_code, 0) << clean_->output;
  const fs::path other = *dir_ / "other";
  fs::create_directories(other);
  fs::copy(*dir_ / "clean" / "step-15", other / "step-15", fs::copy_options::recursive);
  std::ofstream(other / "latest") << "step-15\n";
  const CommandRun r = launch("other", "ZDP_TRAIN_FAULT = \"rank=1,step=3,attempt=0\"", " --set checkpoint.resume=never");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("checkpoint: resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(bitwise_equal(final_model("other"), final_model("clean")));
}

}  // namespace
}  // namespace zdp::trainer
