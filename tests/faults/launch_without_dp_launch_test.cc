// dp-train ranks started without dp-launch, as torchrun or srun would start them: with
// nothing but torchrun's five variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), under torchrun proper (TORCHELASTIC_RUN_ID, its agent holding
// MASTER_PORT), and with srun's variables. Rank 0 hosts the store; each job trains to
// the end and its last checkpoint is byte-identical to dp-launch's. A rank whose store
// never comes says so within seconds and gives up at the startup timeout.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/faults/fault_jobs.h"

namespace zdp::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr int kSteps = 4;

// Runs both ranks (each with `env` plus its own variables) and returns their runs.
std::vector<JobRun> run_ranks(const std::string& config, const std::vector<std::map<std::string, std::string>>& envs) {
  std::vector<Job> jobs;
  for (const auto& env : envs) {
    jobs.push_back(start_job({ZDP_DP_TRAIN, "--config", config}, env, /*clean_env=*/true));
  }
  std::vector<JobRun> runs(jobs.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < jobs.size(); ++i) readers.emplace_back([&, i] { runs[i] = finish_job(jobs[i], seconds(90)); });
  for (auto& t : readers) t.join();
  return runs;
}

class WithoutDpLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    // The reference: the same job under dp-launch.
    const std::string dir = reference_.path();
    const JobRun ref = run_job({ZDP_DP_LAUNCH, write_job_config(dir, free_port(), kSteps)});
    ASSERT_EQ(ref.exit_code, 0) << ref.output();
    reference_step_ = fs::path(dir) / "ckpt" / ("step-" + std::to_string(kSteps));
  }

  void expect_trained(const std::vector<JobRun>& runs, const std::string& dir) {
    for (size_t r = 0; r < runs.size(); ++r) {
      EXPECT_EQ(runs[r].exit_code, 0) << "rank " << r << ":\n" << runs[r].output();
    }
    EXPECT_TRUE(runs[0].has("rank 0 hosts the job store")) << runs[0].output();
    EXPECT_TRUE(same_checkpoint(reference_step_, fs::path(dir) / "ckpt" / ("step-" + std::to_string(kSteps))));
  }

  TempDir reference_;
  fs::path reference_step_;
};

TEST_F(WithoutDpLaunch, TorchrunsFiveVariablesTrainToTheEnd) {
  TempDir dir;
  const int port = free_port();
  const std::string config = write_job_config(dir.path(), port, kSteps);
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back({{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", std::to_string(r)},
                    {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
  }
  expect_trained(run_ranks(config, envs), dir.path());
}

TEST_F(WithoutDpLaunch, UnderTorchrunsAgentTheStoreIsAtMasterPortPlusOne) {
  TempDir dir;
  // The "agent" holds MASTER_PORT, as torchrun's does with its own store. The port above
  // it, where rank 0 will host zdp's store, must be free too: under a parallel ctest
  // another test's socket may hold it, so the pair is drawn again until both are.
  int agent = -1, port = 0;
  for (int attempt = 0; attempt < 50 && agent < 0; ++attempt) {
    agent = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(agent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(agent, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(agent, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    a.sin_port = htons(static_cast<uint16_t>(port + 1));
    const bool above_free = port < 65535 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(probe);
    if (!above_free) {
      ::close(agent);
      agent = -1;
    }
  }
  ASSERT_GE(agent, 0) << "no free pair of loopback ports in 50 draws";
  const std::string config = write_job_config(dir.path(), port, kSteps);
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back({{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", std::to_string(r)},
                    {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)}, {"TORCHELASTIC_RUN_ID", "test"}});
  }
  const std::vector<JobRun> runs = run_ranks(config, envs);
  ::close(agent);
  expect_trained(runs, dir.path());
  EXPECT_TRUE(runs[0].has("127.0.0.1:" + std::to_string(port + 1))) << runs[0].output();
}

TEST_F(WithoutDpLaunch, SrunsVariablesTrainToTheEnd) {
  TempDir dir;
  const int port = free_port();
  const std::string config = write_job_config(dir.path(), port, kSteps);
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back({{"SLURM_PROCID", std::to_string(r)}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", std::to_string(r)},
                    {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_JOB_NODELIST", "localhost"},
                    {"MASTER_PORT", std::to_string(port)}});
  }
  expect_trained(run_ranks(config, envs), dir.path());
}

TEST(WithoutDpLaunchStore, ARankWhoseStoreNeverComesSaysSoAndGivesUpAtTheStartupTimeout) {
  TempDir dir;
  const int port = free_port();
  const std::string config = write_job_config(dir.path(), port, kSteps);
  const JobRun run = finish_job(start_job({ZDP_DP_TRAIN, "--config", config, "--set", "launch.startup_timeout_s=6"},
                                          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                           {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}},
                                          true),
                                seconds(60));
  const std::string where = "waiting for the store at 127.0.0.1:" + std::to_string(port) + " (rank 0 hosts it";
  const double said = run.when(where);
  std::printf("said it was waiting after %.1f s; gave up after %.1f s\n", said, run.seconds);
  EXPECT_GE(said, 0) << run.output();
  EXPECT_LT(said, 5.0);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(run.has("cannot connect to the store at 127.0.0.1:" + std::to_string(port))) << run.output();
  EXPECT_GE(run.seconds, 6.0);
  EXPECT_LT(run.seconds, 15.0);
}

// launch.startup_timeout_s = 0 is no rendezvous deadline: a rank started before rank 0
// hosts the store waits for it (as long as a collective waits, collective_timeout_s), where
// it used to try once and fail at once.
TEST(WithoutDpLaunchStore, WithoutAStartupDeadlineARankWaitsForTheStore) {
  TempDir dir;
  const int port = free_port();
  const std::string config = write_job_config(dir.path(), port, kSteps);
  const JobRun run = finish_job(start_job({ZDP_DP_TRAIN, "--config", config, "--set", "launch.startup_timeout_s=0",
                                           "--set", "launch.collective_timeout_s=12"},
                                          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                                           {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}},
                                          true),
                                seconds(60));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(run.has("waiting for the store at 127.0.0.1:" + std::to_string(port))) << run.output();
  EXPECT_TRUE(run.has("cannot connect to the store at 127.0.0.1:" + std::to_string(port))) << run.output();
  EXPECT_GE(run.seconds, 12.0) << run.output();
  EXPECT_LT(run.seconds, 25.0);
}

}  // namespace
}  // namespace zdp::testing
