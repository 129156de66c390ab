// dp-launch end to end: the real launcher runs rank_probe (or dp-check) ranks on
// loopback; the tests watch its exit status, its output, the logs and the process table.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/launcher_harness.h"
#include "testing/run_command.h"
#include "testing/svg_check.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using zdp::testing::Clock;
using zdp::testing::finish;
using zdp::testing::launch;
using zdp::testing::LaunchRun;
using zdp::testing::Launcher;
using zdp::testing::LauncherTest;
using zdp::testing::processes_with;
using zdp::testing::read_file;
using zdp::testing::start;

TEST_F(LauncherTest, FourRanksCheckTheirEnvironmentAndMeet) {
  const LaunchRun run = launch({config(4, {})});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 4; ++r) {
    const std::string line = "[rank " + std::to_string(r) + "] probe rank " + std::to_string(r) + "/4 ok (local " +
                             std::to_string(r) + "/4, attempt 0, sum 10)";
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
    const std::string log = read_file(dir_ / "logs" / ("rank-" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("probe rank " + std::to_string(r) + "/4 ok"), std::string::npos) << log;
  }
  // The ranks got the resolved config.
  EXPECT_NE(read_file(dir_ / "logs" / "config.toml").find("nproc_per_node = 4"), std::string::npos);
}

TEST_F(LauncherTest, DpCheckCompletesACollectiveRound) {
  const LaunchRun run = launch({config(2, {}, "", ZDP_DP_CHECK)});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 1] dp-check: rank 1/2"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("all_reduce and broadcast OK"), std::string::npos) << run.output;
}

// Alone (a world of one), with a size that is not whole fp32 elements: the figure names the
// bytes reduced, and no bus bandwidth (nothing moves between ranks; it printed 600 GB/s).
TEST(DpCheck, AloneItNamesTheBytesItReducedAndNoBusBandwidth) {
  std::FILE* p = ::popen((std::string("env -u ZDP_CONFIG -u RANK -u WORLD_SIZE ") + ZDP_DP_CHECK +
                          " --bench-bytes 5 2>&1").c_str(),
                         "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("all_reduce of 4 B"), std::string::npos) << out;
  EXPECT_NE(out.find("no bus bandwidth in a world of 1"), std::string::npos) << out;
}

TEST_F(LauncherTest, AKilledRankStopsTheJobWithinSecondsNamingIt) {
  const LaunchRun run = launch({config(4, {"--kill-rank", "2", "--sleep-ms", "60000"})});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 10.0) << run.output;
  EXPECT_NE(run.output.find("rank 2 (node 0, pid"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("killed by signal 9 (SIGKILL)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("last lines of rank 2"), std::string::npos) << run.output;
}

TEST_F(LauncherTest, AFailingRankIsReportedWithItsExitCodeAndLastLines) {
  const LaunchRun run = launch({config(3, {"--fail-rank", "1", "--exit-code", "7", "--sleep-ms", "60000"})});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 10.0);
  EXPECT_NE(run.output.find("rank 1 (node 0"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("exit code 7"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("  | probe rank 1 exiting with 7"), std::string::npos) << run.output;
}

TEST_F(LauncherTest, ARankThatNeverJoinsFailsTheJobAtTheStartupTimeout) {
  const LaunchRun run = launch({config(3, {"--hang-rank", "2"}, "", ZDP_RANK_PROBE), "--set", "launch.startup_timeout_s=3"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 3.0 + 10.0) << run.output;
  EXPECT_NE(run.output.find("startup_timeout_s (3 s) passed: rank(s) 2 never reached the job store; rank(s) 0, 1 "
                            "reached it but did not finish the rendezvous"),
            std::string::npos)
      << run.output;
}

// The deadline holds for ranks that never reach the store as well: "/bin/sleep 8" with
// startup_timeout_s = 2 used to run 8 s and exit 0. startup_timeout_s = 0 turns it off
// for programs that never call zdp::init.
TEST_F(LauncherTest, StartupTimeoutAlsoStopsRanksThatNeverReachTheStore) {
  const LaunchRun run = launch({config(2, {"8"}, "", "/bin/sleep"), "--set", "launch.startup_timeout_s=2"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 6.0) << run.output;
  EXPECT_NE(run.output.find("startup_timeout_s (2 s) passed: rank(s) 0, 1 never reached the job store (a program that "
                            "does not call zdp::init needs launch.startup_timeout_s = 0)"),
            std::string::npos)
      << run.output;
  const LaunchRun off = launch({config(2, {"3"}, "", "/bin/sleep"), "--set", "launch.startup_timeout_s=0"});
  EXPECT_EQ(off.exit_code, 0) << off.output;
  EXPECT_GE(off.seconds, 3.0) << off.output;
}

TEST_F(LauncherTest, RanksThatIgnoreSigtermAreKilledAfterTheGrace) {
  const LaunchRun run = launch({config(2, {"--fail-rank", "0", "--ignore-sigterm", "--sleep-ms", "60000"})}, {}, 60s);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("rank 1 did not stop within"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 15.0);
}

TEST_F(LauncherTest, SigtermToTheLauncherEndsTheJobCleanly) {
  const auto t0 = Clock::now();
  Launcher l = start({config(2, {"--sleep-ms", "60000"})}, {});
  ASSERT_GT(l.pid, 0);
  std::this_thread::sleep_for(3s);  // the ranks are up and sleeping
  ::kill(l.pid, SIGTERM);
  const LaunchRun run = finish(l, 30s, t0);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  EXPECT_NE(run.output.find("received signal 15"), std::string::npos) << run.output;
}

// A second signal while the ranks are given their grace kills them at once (the grace ran
// its 5 s whatever came), and Ctrl-\ (SIGQUIT) is one of the signals that stop the job:
// its default dumped the launcher's core and left the ranks to the lifeline's SIGKILL.
TEST_F(LauncherTest, ASecondSignalKillsRanksThatIgnoreTheFirst) {
  Launcher l = start({config(2, {"--ignore-sigterm", "--sleep-ms", "60000"})}, {});
  ASSERT_GT(l.pid, 0);
  std::this_thread::sleep_for(3s);  // the ranks are up and sleeping
  const auto t0 = Clock::now();
  ::kill(l.pid, SIGTERM);
  std::this_thread::sleep_for(1500ms);  // a second or more after the first: a second request
  ::kill(l.pid, SIGQUIT);
  const LaunchRun run = finish(l, 30s, t0);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  EXPECT_NE(run.output.find("signal 15: stopping the ranks (SIGTERM, SIGKILL after 5 s"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("is being stopped and another signal came; killing it"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 4.5) << run.output;
}

// One stop delivered twice within a second (Ctrl-C reaches `dp-launch scale` and the
// launcher it runs, and scale passes it on; timeout(1) signals its child, then its group)
// is one request: the ranks keep their grace. Counted as a second, it SIGKILLed them.
TEST_F(LauncherTest, TheSameStopDeliveredTwiceWithinASecondKeepsTheGrace) {
  Launcher l = start({config(2, {"--ignore-sigterm", "--sleep-ms", "60000"})}, {});
  ASSERT_GT(l.pid, 0);
  std::this_thread::sleep_for(3s);  // the ranks are up and sleeping
  const auto t0 = Clock::now();
  ::kill(l.pid, SIGTERM);
  std::this_thread::sleep_for(50ms);
  ::kill(l.pid, SIGTERM);
  const LaunchRun run = finish(l, 30s, t0);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  EXPECT_EQ(run.output.find("another signal came"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did not stop within 5 s; killing it"), std::string::npos) << run.output;
  EXPECT_GT(run.seconds, 4.5) << run.output;
}

TEST_F(LauncherTest, MaxRestartsRestartsTheWholeGroup) {
  const LaunchRun run = launch({config(2, {"--fail-rank", "1", "--fail-attempt", "0"}, "max_restarts = 2")});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("restarting the job as attempt 1 (restart 1 of 2)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("probe rank 1/2 ok (local 1/2, attempt 1"), std::string::npos) << run.output;
  // The log keeps both attempts.
  const std::string log = read_file(dir_ / "logs" / "rank-1.log");
  EXPECT_NE(log.find("=== attempt 0 ==="), std::string::npos);
  EXPECT_NE(log.find("=== attempt 1 ==="), std::string::npos);
}

// A rank that fails on every attempt: max_restarts = 2 runs the job 3 times, then gives up
// (no test reached the give-up branch with restarts counted: every other fault fired once).
TEST_F(LauncherTest, MaxRestartsGivesUpAfterItsAttempts) {
  const LaunchRun run = launch({config(2, {"--fail-rank", "1"}, "max_restarts = 2")});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("giving up after 3 attempts (launch.max_restarts = 2)"), std::string::npos) << run.output;
  const std::string log = read_file(dir_ / "logs" / "rank-1.log");
  for (int a = 0; a < 3; ++a) EXPECT_NE(log.find("=== attempt " + std::to_string(a) + " ==="), std::string::npos) << log;
  EXPECT_EQ(log.find("=== attempt 3 ==="), std::string::npos) << log;
  EXPECT_EQ(run.output.find("attempt 4"), std::string::npos) << run.output;
}

TEST_F(LauncherTest, TwoLaunchersOnLoopbackFormOneWorldOfFour) {
  const std::string cfg = config(2, {}, "nnodes = 2");
  const std::map<std::string, std::string> env = {{"ZDP_JOB_SECRET", "test-secret-00042"}};
  const auto t0 = Clock::now();
  Launcher node1 = start({cfg, "--node-rank", "1"}, env);
  Launcher node0 = start({cfg, "--node-rank", "0"}, env);
  const LaunchRun r0 = finish(node0, 60s, t0);
  const LaunchRun r1 = finish(node1, 60s, t0);
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_NE(r0.output.find("probe rank 1/4 ok (local 1/2"), std::string::npos) << r0.output;
  EXPECT_NE(r1.output.find("probe rank 3/4 ok (local 1/2"), std::string::npos) << r1.output;
}

TEST_F(LauncherTest, AMultiNodeJobNeedsAJobSecret) {
  const LaunchRun run = launch({config(2, {}, "nnodes = 2")}, {{"ZDP_JOB_SECRET", ""}});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("ZDP_JOB_SECRET"), std::string::npos) << run.output;
}

TEST_F(LauncherTest, DryRunPrintsTheLayoutAndStartsNothing) {
  const LaunchRun run = launch({config(2, {"--sleep-ms", "60000"}), "--dry-run", "--set", "zero.stage=3"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("# world: 1 node(s) x 2 rank(s) = 2 ranks"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("# rank 1: " + std::string(ZDP_RANK_PROBE)), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("RANK=1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--set"), std::string::npos) << "overrides are marked:\n" << run.output;
  EXPECT_EQ(run.output.find("probe rank"), std::string::npos) << "a rank ran:\n" << run.output;
  EXPECT_FALSE(fs::exists(dir_ / "logs" / "rank-0.log"));
}

TEST_F(LauncherTest, ConfigErrorsAreAllReportedAndNothingStarts) {
  const fs::path bad = dir_ / "bad.toml";
  std::ofstream(bad) << "[launch]\nnproc_per_nod = 2\nmaster_port = 70000\n";
  const LaunchRun run = launch({bad.string()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("bad.toml:2"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did you mean"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("bad.toml:3"), std::string::npos) << run.output;
}

TEST_F(LauncherTest, AMissingProgramIsAClearError) {
  const LaunchRun run = launch({config(2, {}, "", (dir_ / "no-such-program").string())});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("no-such-program"), std::string::npos) << run.output;
}

// dp-launch started with stdin closed (`0<&-`, a daemon): its lifeline pipe took fd 0,
// which each rank's stdin then replaced, and ranks behind a wrapper outlived a SIGKILLed
// launcher. The standard descriptors are opened on /dev/null first
// (core/internal/standard_fds.h), so the ranks' lifeline is above them.
TEST_F(LauncherTest, ALauncherStartedWithStdinClosedGivesItsRanksALifeline) {
  const std::string cfg = config(1, {"-c", "echo lifeline=$ZDP_LIFELINE_FD"}, "", "/bin/sh", 0);
  const zdp::testing::CommandRun r = zdp::testing::run_command(std::string(ZDP_DP_LAUNCH) + " " + cfg + " 0<&-");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::smatch fd;
  ASSERT_TRUE(std::regex_search(r.output, fd, std::regex(R"(lifeline=(\d+))"))) << r.output;
  EXPECT_GE(std::stoi(fd[1]), 3) << r.output;
}


}  // namespace

// `dp-launch plan` starts nothing and prints, for the configured world size and each
// --world, one row per ZeRO stage and a recommendation, and the same as JSON lines.
// The "sent MiB" column of `stage`'s row in the first world size's table of a plan.
double planned_sent_mib(const std::string& plan, int stage) {
  std::istringstream lines(plan);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 3 && line.compare(0, 2, "  ") == 0 && line[2] == '0' + stage && line[3] == ' ') {
      const size_t bar = line.find('|');
      return bar == std::string::npos ? -1 : std::stod(line.substr(bar + 1));
    }
  }
  return -1;
}

// What the launch would refuse, plan refuses too; what the job would run, it plans.
TEST_F(LauncherTest, PlanRefusesWhatTheLaunchWouldAndPlansWhatItWouldRun) {
  const std::string configs = std::string(ZDP_SOURCE_DIR) + "/configs/";
  const std::string logs = "launch.log_dir=\"" + (dir_ / "plan-checks").string() + "\"";
  auto plan = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    args.insert(args.end(), {"--set", logs});
    return launch(args);
  };
  // nproc_per_node x nnodes wrapped int to 0 (a division by zero) or below.
  LaunchRun r = plan({configs + "quickstart.toml", "--set", "launch.nproc_per_node=4096", "--set",
                      "launch.nnodes=65536"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("launch.nproc_per_node (4096) x launch.nnodes (65536) = 268435456 ranks, more than a job "
                          "may have (1048576)"),
            std::string::npos) << r.output;
  // A global batch its world does not divide was planned as a smaller one.
  r = plan({configs + "quickstart.toml", "--set", "train.global_batch=30"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.global_batch (30) is not divisible by train.micro_batch (8) x world size (2)"),
            std::string::npos) << r.output;
  // --gpu: "auto" ranks per node are the planned node's GPUs (it planned one rank).
  r = plan({configs + "gpu-gpt2.toml", "--gpu", "h200", "--set", "launch.nproc_per_node=auto"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("world size 8 (configured)"), std::string::npos) << r.output;
  // Nodes of --gpus-per-node GPUs, and --nodes N of them; without the flag, the table's 8
  // for a one-node config. The config's own ranks per node (1 in gpt2-124m) were used:
  // every rank planned as a node of its own, over InfiniBand, whatever the flags said.
  r = plan({configs + "gpt2-124m.toml", "--gpu", "h200", "--gpus-per-node", "4", "--nodes", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  nodes of 4 ranks on that link"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("world size 8: "), std::string::npos) << r.output;
  r = plan({configs + "gpt2-124m.toml", "--gpu", "h200", "--world", "16,12"});
  EXPECT_NE(r.output.find("  nodes of 8 ranks on that link"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("note: 12 ranks are not whole nodes of 8 (dp-launch runs nproc_per_node x nnodes); "
                          "planned as 2 nodes"),
            std::string::npos) << r.output;
  // A model the per-kernel model does not cover: 40% of the part's peak in its dtype (a
  // flat 400 TFLOP/s was 20x an A100's fp32 peak).
  r = plan({configs + "mlp-cpu.toml", "--gpu", "a100-40g", "--set", "launch.backend=nccl"});
  EXPECT_NE(r.output.find("compute 7.8e+03 GFLOP/s per rank (assumed: 40% of --gpu a100-40g's fp32 peak"),
            std::string::npos) << r.output;
  // A config path that is not UTF-8: the plan's JSON lines replace the byte (dump() threw,
  // and the plan ended in abort() with no plan.jsonl).
  const fs::path latin1 = dir_ / "plan-caf\xe9.toml";
  fs::copy_file(configs + "quickstart.toml", latin1, fs::copy_options::overwrite_existing);
  fs::remove(dir_ / "plan-checks" / "plan.jsonl");  // the plans above wrote one
  r = plan({latin1.string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "plan-checks" / "plan.jsonl")) << r.output;
  // No stage fits: the message names the smallest (here stage 0), not stage 3.
  r = plan({configs + "gpt2-124m.toml", "--gpu", "h200", "--device-memory", "8800MiB"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("recommended: none: no stage fits in 8.59 GiB per rank (the smallest, stage 0, needs"),
            std::string::npos) << r.output;
  // Deterministic mode all-gathers every micro-batch's buckets: a rank sends (K - 1) x the
  // bucket a micro-batch, accum_steps (2) x 3 / (2 x 3/4) = 4x the all-reduce's bytes at K = 4.
  const std::vector<std::string> k4 = {configs + "quickstart.toml", "--set", "launch.nproc_per_node=4",
                                       "--set", "train.global_batch=64"};
  r = plan(k4);
  const double all_reduce = planned_sent_mib(r.output, 0);
  std::vector<std::string> deterministic = k4;
  deterministic.insert(deterministic.end(), {"--set", "train.deterministic=true"});
  const LaunchRun d = plan(deterministic);
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NEAR(planned_sent_mib(d.output, 0), 4 * all_reduce, 0.02) << r.output << d.output;
  // CPU ranks on two nodes: the bytes across nodes counted per node, so that compressing
  // only those (zero.compress = "inter-node") differs from uncompressed (every rank was
  // planned as one node's: 0.00 vs 0.00 MiB, "no difference").
  r = plan({configs + "quickstart.toml", "--set", "launch.nnodes=2", "--set", "launch.master_addr=10.0.0.1", "--set",
            "zero.reduce_dtype=int8", "--set", "zero.compress=inter-node"});
  EXPECT_NE(r.output.find("  nodes of 2 ranks on that link"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 1 compressed vs uncompressed: step"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("inter-node MiB sent 0.00 vs 0.00"), std::string::npos) << r.output;
  // Links and node counts past any machine are refused, not printed as 300-digit times.
  r = plan({configs + "quickstart.toml", "--link", "1e-300,0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // An empty value (an unset $DIR) is refused, not read as "not given"; --calibrate
  // measures what --link and --flops give, so the two are refused together.
  for (const char* flag : {"--gpu", "--from-profile", "--link"}) {
    r = plan({configs + "quickstart.toml", flag, ""});
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("an empty value"), std::string::npos) << r.output;
  }
  r = plan({configs + "quickstart.toml", "--calibrate", "--flops", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("use one or the other"), std::string::npos) << r.output;
  // scale checks every world size before the first run: 5000 ranks on one node are
  // refused before world size 1 runs.
  r = launch({"scale", configs + "quickstart.toml", "--world", "1,5000", "--steps", "3", "--set", logs});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("world size 5000 cannot run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("world size 1: global batch"), std::string::npos) << "world size 1 ran first:\n" << r.output;
  r = plan({configs + "gpu-gpt2.toml", "--gpu", "h200", "--nodes", "200000"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--nodes 200000 x 8 GPUs per node = 1600000 ranks"), std::string::npos) << r.output;
  // The launch's options before the subcommand were parsed and dropped: another plan.
  r = launch({"--set", "model.d_model=128", "plan", configs + "quickstart.toml", "--set", logs});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("go after 'plan'"), std::string::npos) << r.output;
  // The config before the subcommand: CLI11 found plan's own config missing first (exit
  // 106, "config is required"), so the hint above was never printed.
  r = launch({configs + "quickstart.toml", "plan"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("go after 'plan'"), std::string::npos) << r.output;
  // A usage error exits 2 like every other refusal, not with CLI11's own codes (109, 105).
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--bogus"}, {"--node-rank", "x"}}) {
    r = launch(bad);
    EXPECT_EQ(r.exit_code, 2) << r.output;
  }
  EXPECT_EQ(launch({"--help"}).exit_code, 0);
}

TEST_F(LauncherTest, PlanPrintsEveryStageForEachWorldSizeAndStartsNothing) {
  const std::string quickstart = std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml";
  const fs::path logs = dir_ / "plan";
  const LaunchRun run = launch({"plan", quickstart, "--world", "2,4", "--set", "launch.log_dir=\"" + logs.string() + "\""});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // gpt, d = 96, 3 blocks, vocab 256, seq 64: (256 + 64) d + 3 (12 d^2 + 13 d) + 2 d.
  EXPECT_NE(run.output.find("Psi = 366432 parameters"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("world size 2 (configured): global batch 32 = 2 x micro_batch 8 x accum_steps 2"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("world size 4: global batch 64"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("world size 2:"), std::string::npos) << "2 is planned once:\n" << run.output;
  std::istringstream lines(run.output);
  int stage_rows = 0, recommendations = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 3 && line.compare(0, 2, "  ") == 0 && line[2] >= '0' && line[2] <= '3' && line[3] == ' ') {
      ++stage_rows;
    }
    if (line.find("  recommended: stage 0, the lowest stage that fits") == 0) ++recommendations;
  }
  EXPECT_EQ(stage_rows, 8) << run.output;
  EXPECT_EQ(recommendations, 2) << run.output;
  std::ifstream jsonl(logs / "plan.jsonl");
  int stage_lines = 0, total = 0;
  for (std::string line; std::getline(jsonl, line); ++total) {
    if (line.find("\"kind\":\"stage\"") != std::string::npos) ++stage_lines;
  }
  EXPECT_EQ(stage_lines, 8);
  EXPECT_EQ(total, 12);  // + model, assumptions, 2 recommendations
  // plan.svg beside it, named last: a memory bar and a step-time bar per world size and stage.
  EXPECT_NE(run.output.find("plot: " + (logs / "plan.svg").string() + "\n"), std::string::npos) << run.output;
  const zdp::testing::CommandRun svg = zdp::testing::check_svg(ZDP_SOURCE_DIR, (logs / "plan.svg").string(), {"--bars", "16"});
  EXPECT_EQ(svg.exit_code, 0) << svg.output;
  EXPECT_FALSE(fs::exists(logs / "rank-0.log")) << "plan started a rank";

  // 1 MiB per rank holds no stage; a malformed size is refused.
  const LaunchRun tiny = launch({"plan", quickstart, "--device-memory", "1MiB", "--set",
                                 "launch.log_dir=\"" + logs.string() + "\""});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.output;
  EXPECT_NE(tiny.output.find("recommended: none: no stage fits in 1.00 MiB per rank"), std::string::npos) << tiny.output;
  // --calibrate measures this machine (a forked second rank, about a second) and says so.
  const LaunchRun calibrated = launch({"plan", quickstart, "--calibrate", "--set", "launch.log_dir=\"" + logs.string() + "\""});
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.output;
  EXPECT_NE(calibrated.output.find("(calibrated (2-rank Gloo all-reduce over loopback)"), std::string::npos)
      << calibrated.output;
  EXPECT_NE(calibrated.output.find("(calibrated: micro-batches of this model on one CPU rank"), std::string::npos)
      << calibrated.output;
  const LaunchRun bad = launch({"plan", quickstart, "--device-memory", "lots"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--device-memory 'lots' is not a size"), std::string::npos) << bad.output;
}
