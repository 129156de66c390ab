// dp-launch end to end from a test: start it with arguments and an environment, collect
// its output and exit status within a limit, find processes left behind, and a fixture
// that writes configs running rank_probe (or another program) in a temporary folder.
// For test targets compiled with ZDP_DP_LAUNCH and ZDP_RANK_PROBE (tests/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "testing/free_port.h"

extern char** environ;

namespace zdp::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct LaunchRun {
  int exit_code = -1;
  int signal = 0;
  std::string output;
  double seconds = 0;
};

// Starts dp-launch with `args`; `during(pid)` runs once it has started (e.g. to signal it).
struct Launcher {
  pid_t pid = -1;
  int out_fd = -1;
};

// Starts `all` (a program's path and its arguments: dp-launch behind a shell or setsid).
inline Launcher start_command(std::vector<std::string> all, const std::map<std::string, std::string>& env) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  // posix_spawn: nothing of ours runs between fork and exec (docs/design.md, "Fork safety").
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0) environment.push_back(entry);
  }
  for (const auto& [k, v] : env) environment.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(err, 0) << "cannot run " << all[0];
  ::close(fds[1]);
  return Launcher{err == 0 ? pid : -1, fds[0]};
}

inline Launcher start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> all = {ZDP_DP_LAUNCH};
  all.insert(all.end(), args.begin(), args.end());
  return start_command(std::move(all), env);
}

inline LaunchRun finish(Launcher l, std::chrono::seconds limit, const Clock::time_point start) {
  LaunchRun run;
  char buf[4096];
  const auto deadline = start + limit;
  for (;;) {
    pollfd p{l.out_fd, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) {
      if (l.pid > 0) ::kill(l.pid, SIGKILL);
      run.output += "\n<test: dp-launch still running at the limit, killed>\n";
      break;
    }
    if (::poll(&p, 1, left) <= 0) continue;
    const ssize_t n = ::read(l.out_fd, buf, sizeof(buf));
    if (n <= 0) break;
    run.output.append(buf, static_cast<size_t>(n));
  }
  ::close(l.out_fd);
  int status = 0;
  if (l.pid > 0) ::waitpid(l.pid, &status, 0);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

inline LaunchRun launch(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
           std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto t0 = Clock::now();
  return finish(start(args, env), limit, t0);
}

// Processes whose command line mentions `tag` (ranks left behind).
inline std::vector<int> processes_with(const std::string& tag) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(entry.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd.find(tag) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/zdp-launch-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    port_ = free_port();
  }
  void TearDown() override {
    EXPECT_TRUE(processes_with(dir_.string()).empty()) << "ranks left behind";
    fs::remove_all(dir_);
  }

  // A config running `program` with `args` (the tag is added so leftovers can be found).
  std::string config(int nproc, const std::vector<std::string>& probe_args, const std::string& extra = "",
                     const std::string& program = ZDP_RANK_PROBE, int startup_timeout_s = 30) {
    // rank_probe takes "--tag <dir>" so that leftovers can be found by command line.
    const bool probe = program == ZDP_RANK_PROBE;
    std::ostringstream args;
    args << "[";
    if (probe) args << "\"--tag\", \"" << dir_.string() << "\"";
    for (const auto& a : probe_args) args << (args.tellp() > 1 ? ", " : "") << "\"" << a << "\"";
    args << "]";
    std::ostringstream c;
    c << "[launch]\nnproc_per_node = " << nproc << "\nprogram = \"" << program << "\"\nargs = " << args.str()
      << "\nlog_dir = \"" << (dir_ / "logs").string() << "\"\nmaster_port = " << port_
      << "\nstartup_timeout_s = " << startup_timeout_s << "\n" << extra << "\n"
      << "[train]\nglobal_batch = 12\n";  // divisible by every world size used here
    const fs::path path = dir_ / ("job-" + std::to_string(++configs_) + ".toml");
    std::ofstream(path) << c.str();
    return path.string();
  }

  fs::path dir_;
  int port_ = 0;
  int configs_ = 0;
};

}  // namespace zdp::testing
