// dp-launch with dp-train ranks as a person sees it. Under a pseudo-terminal: a status
// line under the ranks' lines, redrawn in place, whose bar fills and whose ETA falls, and
// the run ends by naming loss.svg. On a pipe: the ranks' plain lines with an ETA field and
// no redrawing, and a straggler named by the launcher.
#include <gtest/gtest.h>

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "testing/free_port.h"
#include "testing/run_command.h"
#include "testing/svg_check.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct PtyRun {
  int exit_code = -1;
  std::string output;
};

// Runs `argv` on the slave side of a new pseudo-terminal (160 columns) and collects what
// it writes until it exits or `limit` passes (then it is killed).
PtyRun run_in_pty(const std::vector<std::string>& argv, std::chrono::seconds limit) {
  int master = -1;
  winsize size{};
  size.ws_row = 40;
  size.ws_col = 160;
  // Everything the child needs is made before forkpty: after it, only async-signal-safe
  // calls until exec (docs/design.md, "Fork safety").
  std::vector<std::string> env_text = {"TERM=xterm"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("TERM=", 0) != 0) env_text.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  if (pid == 0) {
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  PtyRun run;
  if (pid < 0) return run;
  const auto deadline = Clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      run.output += "\n<test: still running at the limit, killed>\n";
      break;
    }
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(master, buf, sizeof(buf));
    if (n <= 0) break;  // EIO: the child and everything it started closed the terminal
    run.output.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

struct Frame {
  int done = 0, bar = 0;  // steps done, '#' in the bar
  double eta_s = -1;
};

// The status lines drawn: every piece of output after a carriage return that starts with
// the bar.
std::vector<Frame> status_frames(const std::string& output) {
  std::vector<Frame> frames;
  const std::regex frame(R"(^\r\x1b\[K\[([#.]+)\] (\d+)/\d+ +\d+% \| ETA (?:(\d+)h(\d+)m|(\d+)m(\d+)s|(\d+)s))");
  for (size_t at = output.find('\r'); at != std::string::npos; at = output.find('\r', at + 1)) {
    std::smatch m;
    const std::string rest = output.substr(at, 200);
    if (!std::regex_search(rest, m, frame)) continue;
    Frame f;
    f.bar = static_cast<int>(std::count(m[1].first, m[1].second, '#'));
    f.done = std::stoi(m[2]);
    if (m[3].matched) f.eta_s = 3600.0 * std::stoi(m[3]) + 60.0 * std::stoi(m[4]);
    else if (m[5].matched) f.eta_s = 60.0 * std::stoi(m[5]) + std::stoi(m[6]);
    else f.eta_s = std::stoi(m[7]);
    frames.push_back(f);
  }
  return frames;
}

std::vector<std::string> launch_args(const std::string& dir, int steps) {
  const std::string port = std::to_string(zdp::testing::free_port());
  return {ZDP_DP_LAUNCH, std::string(ZDP_SOURCE_DIR) + "/configs/mlp-cpu.toml", "--set", "launch.log_dir=\"" + dir + "/logs\"",
          "--set", "launch.master_port=" + port, "--set", std::string("launch.program=\"") + ZDP_DP_TRAIN + "\"",
          "--set", "train.steps=" + std::to_string(steps), "--set", "train.log_every=100", "--set",
          "train.eval_every=100", "--set", "checkpoint.dir=\"" + dir + "/ckpt\"", "--set", "checkpoint.every_steps=0"};
}

TEST(LaunchProgress, OnATerminalTheStatusLineFillsItsBarAndItsEtaFalls) {
  zdp::testing::TempDir dir;
  // The bar is redrawn after each of the ranks' lines (a step line and an evaluation every
  // 100 steps); its first frame's ETA is "?" (no step timed yet), which status_frames does
  // not count: 600 steps drew 5 frames with an ETA (400 drew 3 on a fast machine), and 3
  // once a step lost its loss all-reduce (1.8 ms steps, 600 in 1.2 s under CI's load):
  // 1000 steps.
  const int steps = 1000;
  const PtyRun r = run_in_pty(launch_args(dir.path(), steps), std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<Frame> frames = status_frames(r.output);
  ASSERT_GE(frames.size(), 4u) << "the status line was not drawn often enough:\n" << r.output;
  // The bar fills and the step count grows as the run goes on.
  EXPECT_GT(frames.back().done, frames.front().done) << r.output;
  EXPECT_GT(frames.back().bar, frames.front().bar) << r.output;
  for (size_t i = 1; i < frames.size(); ++i) EXPECT_GE(frames[i].done, frames[i - 1].done) << i;
  // The ETA falls: the early frames promise more time than the late ones, and the last
  // ones reach (about) zero.
  double early = 0, late = 1e9;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i < frames.size() / 3) early = std::max(early, frames[i].eta_s);
    if (i >= frames.size() - frames.size() / 3) late = std::min(late, frames[i].eta_s);
  }
  EXPECT_GT(early, late) << r.output;
  // About zero: within a fifth of the early ETA, and 1 s on a quiet machine (under a
  // parallel ctest the last frame drawn can be step 500's, 2 s before the end).
  EXPECT_LE(late, std::max(1.0, early / 5)) << r.output;
  // The ranks' lines scroll above it: each starts a line, after the status line was erased
  // (lines read together are printed together, after one erase).
  const std::string line = "[rank 0] step 100/" + std::to_string(steps);
  EXPECT_TRUE(r.output.find("\r\x1b[K" + line) != std::string::npos || r.output.find("\n" + line) != std::string::npos)
      << r.output;
  // The run ends by naming its loss curve, and the picture is there.
  EXPECT_NE(r.output.find("dp-train: loss curve in " + dir.path() + "/logs/loss.svg"), std::string::npos) << r.output;
  const zdp::testing::CommandRun svg =
      zdp::testing::check_svg(ZDP_SOURCE_DIR, dir.path() + "/logs/loss.svg",
                              {"--series", "train loss=" + std::to_string(steps), "--series",
                               "held-out loss=" + std::to_string(steps / 100 + 1)});  // step 0 and every 100
  EXPECT_EQ(svg.exit_code, 0) << svg.output;
}

TEST(LaunchProgress, OnAPipeTheLinesCarryAnEtaAndAStragglerIsNamed) {
  zdp::testing::TempDir dir;
  std::string cmd = "ZDP_PROFILE_TEST_DELAY=rank=1,ms=60";
  for (const std::string& a : launch_args(dir.path(), 60)) cmd += " '" + a + "'";
  // The test hook slows rank 1's micro-batches in profiling runs only.
  cmd += " --set profile.enabled=true --set 'profile.dir=\"" + dir.path() + "/profile\"' --set train.log_every=20";
  const zdp::testing::CommandRun r = zdp::testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << "a status line was drawn on a pipe:\n" << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[rank 0\] step 20/60 \| loss [0-9.]+ \| .* \| ETA \d+s\n)")))
      << r.output;
  EXPECT_NE(r.output.find("[rank 0] step 60/60"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(dp-launch: rank 1 slow: [0-9.]+ ms compute per step)"))) << r.output;
  EXPECT_EQ(r.output.find("dp-launch: rank 0 slow"), std::string::npos) << r.output;
}

// The quickstart GPT at stage 3: rank 0 waits inside its layer scopes for the gathers
// rank 1 joins late. That wait counted as rank 0's compute (87 ms against rank 1's 207 ms
// in the profiler, but the same to dp-launch), and no straggler was named.
TEST(LaunchProgress, AStragglerIsNamedWhenItsPeersWaitForItInsideForward) {
  zdp::testing::TempDir dir;
  std::string cmd = "ZDP_PROFILE_TEST_DELAY=rank=1,ms=60";
  std::vector<std::string> args = launch_args(dir.path(), 40);
  args[1] = std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " --set zero.stage=3 --set 'data.kind=\"synthetic\"' --set profile.enabled=true --set 'profile.dir=\"" +
         dir.path() + "/profile\"'";
  const zdp::testing::CommandRun r = zdp::testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(dp-launch: rank 1 slow: [0-9.]+ ms compute per step)"))) << r.output;
  EXPECT_EQ(r.output.find("dp-launch: rank 0 slow"), std::string::npos) << r.output;
}

}  // namespace
