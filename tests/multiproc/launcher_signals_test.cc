// dp-launch against what its environment and its ranks can do to it: a rank that prints as
// fast as it can, a SIGCHLD the launcher inherited as ignored, a closed terminal (SIGHUP)
// with ranks that started processes of their own, Ctrl-C while a node waits for node 0's
// store or node 0 waits for the others, and an IPv6 master_addr. Each used to hang the
// launcher, leave processes behind or report success; each must now end within seconds.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/free_port.h"
#include "testing/ipv6_loopback.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using zdp::testing::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Processes whose command line mentions `tag` (what a job left behind).
std::vector<int> processes_with(const std::string& tag) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmd = read_file((entry.path() / "cmdline").string());
    if (cmd.find(tag) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

struct Exit {
  int code = -1;       // -1: killed by a signal, or still running at the limit
  bool hung = false;   // still running at the limit (then killed)
  double seconds = 0;
  std::string output;  // stdout and stderr, from a file (a flood must not fill memory)
};

class Launcher {
 public:
  // `argv` run with its output to `log`, with `env` added to the environment.
  Launcher(const std::vector<std::string>& argv, const std::string& log,
           const std::map<std::string, std::string>& env = {})
      : log_(log), start_(Clock::now()) {
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) environment.push_back(*e);
    for (const auto& [k, v] : env) environment.push_back(k + "=" + v);
    std::vector<std::string> args = argv;
    std::vector<char*> a, e;
    for (std::string& s : args) a.push_back(s.data());
    a.push_back(nullptr);
    for (std::string& s : environment) e.push_back(s.data());
    e.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    EXPECT_EQ(::posix_spawn(&pid_, a[0], &actions, nullptr, a.data(), e.data()), 0) << argv[0];
    posix_spawn_file_actions_destroy(&actions);
  }
  pid_t pid() const { return pid_; }
  // Waits for the exit, at most `limit` from the start (then SIGKILL: hung).
  Exit wait(std::chrono::seconds limit) {
    Exit x;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() - start_ > limit) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        x.hung = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    x.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    if (!x.hung && WIFEXITED(status)) x.code = WEXITSTATUS(status);
    const std::string out = read_file(log_);
    x.output = out.size() > 20000 ? out.substr(0, 10000) + "\n...\n" + out.substr(out.size() - 10000) : out;
    return x;
  }

 private:
  std::string log_;
  Clock::time_point start_;
  pid_t pid_ = -1;
};

class LauncherSignals : public ::testing::Test {
 protected:
  // A job of `nproc` ranks of `program` with `args`; no rendezvous deadline or heartbeats
  // (the programs here do not call zdp::init).
  std::string config(int nproc, const std::string& program, const std::vector<std::string>& args,
                     const std::string& extra = "", int startup_timeout_s = 0) {
    std::ostringstream c;
    c << "[launch]\nnproc_per_node = " << nproc << "\nprogram = \"" << program << "\"\nargs = [";
    for (size_t i = 0; i < args.size(); ++i) c << (i ? ", " : "") << "'" << args[i] << "'";
    c << "]\nlog_dir = \"" << dir_.path() << "/logs\"\nmaster_port = " << port_
      << "\nstartup_timeout_s = " << startup_timeout_s << "\nheartbeat_timeout_s = 0\n" << extra << "\n[train]\nglobal_batch = 12\n";
    const std::string path = dir_.path() + "/job-" + std::to_string(++configs_) + ".toml";
    std::ofstream(path) << c.str();
    return path;
  }
  std::string out(const std::string& name) const { return dir_.path() + "/" + name; }
  void expect_a_sigkilled_launchers_ranks_stop(bool exec_after_a_child);
  // Waits until `path` has at least `bytes` bytes (the ranks are up), at most 20 s.
  static void await_output(const std::string& path, size_t bytes = 1) {
    const auto limit = Clock::now() + 20s;
    while (Clock::now() < limit && (!fs::exists(path) || fs::file_size(path) < bytes)) std::this_thread::sleep_for(50ms);
  }
  void TearDown() override {
    std::this_thread::sleep_for(200ms);  // what the kernel still has to reap
    EXPECT_TRUE(processes_with(dir_.path()).empty()) << "processes left behind";
  }

  TempDir dir_;
  int port_ = zdp::testing::free_port();
  int configs_ = 0;
};

// A rank printing as fast as it can kept its pipe full, and the launcher read it until it
// was empty, which never happened: SIGTERM went unseen until the rank stopped on its own.
TEST_F(LauncherSignals, AFloodingRankDoesNotKeepTheLauncherFromStopping) {
  Launcher l({ZDP_DP_LAUNCH, config(1, "/usr/bin/yes", {dir_.path()})}, out("launch.log"));
  await_output(out("logs/rank-0.log"), 1 << 20);
  ::kill(l.pid(), SIGTERM);
  const auto signalled = Clock::now();
  const Exit x = l.wait(60s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 128 + SIGTERM) << x.output;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - signalled).count(), 3.0) << x.output;  // 8-9 s before
}

// A console nobody reads (`dp-launch ... | less`, not scrolled): the supervisor blocked in
// write() on the full pipe and answered no signal until the reader went away. The console
// now writes from a thread of its own through a bounded queue.
TEST_F(LauncherSignals, AConsoleNobodyReadsDoesNotKeepTheLauncherFromStopping) {
  const std::string console = out("console.fifo");
  ASSERT_EQ(::mkfifo(console.c_str(), 0600), 0);
  const int never_read = ::open(console.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // held open, never read
  ASSERT_GE(never_read, 0);
  Launcher l({"/bin/bash", "-c", std::string("exec ") + ZDP_DP_LAUNCH + " " + config(1, "/usr/bin/yes", {dir_.path()}) +
                                     " >" + console + " 2>" + out("stderr.log")},
             out("bash.log"));
  await_output(out("logs/rank-0.log"), 1 << 20);  // the console's pipe (64 KiB) is long full
  ::kill(l.pid(), SIGTERM);
  const auto signalled = Clock::now();
  const Exit x = l.wait(60s);
  ::close(never_read);
  EXPECT_FALSE(x.hung) << read_file(out("stderr.log"));
  EXPECT_EQ(x.code, 128 + SIGTERM) << read_file(out("stderr.log"));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - signalled).count(), 10.0) << read_file(out("stderr.log"));
}

// SIGCHLD inherited as ignored (a parent that set it so, as some job schedulers and
// Python programs do): the kernel reaped the ranks itself, waitpid() never reported their
// exit, and the launcher waited forever for ranks that were long gone.
TEST_F(LauncherSignals, AnInheritedIgnoredSigchldDoesNotHideTheRanksExits) {
  const std::string job = config(2, "/bin/sh", {"-c", "echo done; : " + dir_.path()});
  // bash: dash's trap '' CHLD leaves SIGCHLD at its default.
  Launcher l({"/bin/bash", "-c", std::string("trap '' CHLD; exec ") + ZDP_DP_LAUNCH + " " + job}, out("launch.log"));
  const Exit x = l.wait(30s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 0) << x.output;
  EXPECT_NE(x.output.find("all 2 ranks exited 0"), std::string::npos) << x.output;
}

// A closed terminal or ssh session: SIGHUP killed the launcher at once, and what its ranks
// had started (here a shell each rank runs in the background) outlived it. Now it stops
// the ranks' process groups as for SIGTERM.
TEST_F(LauncherSignals, SighupStopsTheRanksAndWhatTheyStarted) {
  const std::string child = "sleep 1000; : child of a rank " + dir_.path();
  Launcher l({ZDP_DP_LAUNCH, config(2, "/bin/sh", {"-c", "sh -c \"" + child + "\" & echo up; wait"})},
             out("launch.log"));
  await_output(out("logs/rank-1.log"), std::strlen("=== attempt 0 ===\nup\n"));
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(processes_with("child of a rank " + dir_.path()).empty()) << "the ranks' children never started";
  ::kill(l.pid(), SIGHUP);
  const Exit x = l.wait(30s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 128 + SIGHUP) << x.output;
  // TearDown: nothing of the job is left, the ranks' children included.
}

// A node other than 0 retrying node 0's store: Ctrl-C went unseen for as long as
// launch.startup_timeout_s (up to a day).
TEST_F(LauncherSignals, CtrlCWhileWaitingForNodeZerosStoreStopsAtOnce) {
  const std::string job = config(1, "/bin/true", {dir_.path()}, "nnodes = 2", 600);
  Launcher l({ZDP_DP_LAUNCH, job, "--node-rank", "1"}, out("launch.log"), {{"ZDP_JOB_SECRET", "0123456789abcdef0123"}});
  std::this_thread::sleep_for(1500ms);
  ::kill(l.pid(), SIGINT);
  const Exit x = l.wait(60s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 128 + SIGINT) << x.output;
  EXPECT_LT(x.seconds, 10.0) << x.output;
  EXPECT_NE(x.output.find("stopped by signal 2 while connecting to the store of node 0"), std::string::npos)
      << x.output;
}

// Node 0's ranks are done and it waits for node 1's: Ctrl-C there ended with "all ranks
// exited 0" and exit 0, the store gone under node 1. Now it is a failure node 1 hears of.
TEST_F(LauncherSignals, CtrlCWhileNodeZeroWaitsForTheOthersIsNotASuccess) {
  const std::string job =
      config(1, "/bin/sh", {"-c", "test \"$GROUP_RANK\" = 0 || sleep 60; : " + dir_.path()}, "nnodes = 2");
  const std::map<std::string, std::string> secret = {{"ZDP_JOB_SECRET", "0123456789abcdef0123"}};
  Launcher node0({ZDP_DP_LAUNCH, job, "--node-rank", "0"}, out("node0.log"), secret);
  Launcher node1({ZDP_DP_LAUNCH, job, "--node-rank", "1"}, out("node1.log"), secret);
  await_output(out("logs/rank-1.log"));  // node 1's rank is up (and sleeping)
  std::this_thread::sleep_for(1s);       // node 0's rank has exited 0 by now
  ::kill(node0.pid(), SIGINT);
  const Exit x0 = node0.wait(30s);
  EXPECT_FALSE(x0.hung) << x0.output;
  EXPECT_EQ(x0.code, 128 + SIGINT) << x0.output;
  EXPECT_NE(x0.output.find("stopped by signal 2 while waiting for the other nodes"), std::string::npos) << x0.output;
  const Exit x1 = node1.wait(60s);
  EXPECT_FALSE(x1.hung) << x1.output;
  EXPECT_NE(x1.code, 0) << x1.output;
}

// Node 0's ranks are done when a rank of node 1 fails: node 0 said "all ranks exited 0",
// exited 0 and took the store away. Now the job's failure is node 0's exit status too.
TEST_F(LauncherSignals, NodeZeroDoesNotReportSuccessForAJobThatFailedElsewhere) {
  const std::string job =
      config(1, "/bin/sh", {"-c", "test \"$GROUP_RANK\" = 0 || { sleep 1; exit 3; }; : " + dir_.path()}, "nnodes = 2");
  const std::map<std::string, std::string> secret = {{"ZDP_JOB_SECRET", "0123456789abcdef0123"}};
  Launcher node0({ZDP_DP_LAUNCH, job, "--node-rank", "0"}, out("node0.log"), secret);
  Launcher node1({ZDP_DP_LAUNCH, job, "--node-rank", "1"}, out("node1.log"), secret);
  const Exit x1 = node1.wait(60s);
  EXPECT_EQ(x1.code, 1) << x1.output;
  const Exit x0 = node0.wait(60s);
  EXPECT_FALSE(x0.hung) << x0.output;
  EXPECT_EQ(x0.code, 1) << x0.output;
  EXPECT_NE(x0.output.find("but another node stopped the job: rank 1 (node 1"), std::string::npos) << x0.output;
}

// A rank killed on node 1 makes node 0's rank fail, often before node 1's launcher has
// posted why (here node 0's rank exits 1 at 0.5 s, node 1's is killed at 0.7 s): node 0
// named its own rank as the job's failure. Now node 0 waits a second for another node's
// word before blaming its own, and a reason on the job-failed key is not replaced.
TEST_F(LauncherSignals, ARankKilledOnAnotherNodeIsBlamedNotTheRankThatFailedBecauseOfIt) {
  const std::string job = config(
      1, "/bin/sh", {"-c", "if test \"$GROUP_RANK\" = 1; then sleep 0.7; kill -9 $$; else sleep 0.5; exit 1; fi; : " +
                               dir_.path()},
      "nnodes = 2");
  const std::map<std::string, std::string> secret = {{"ZDP_JOB_SECRET", "0123456789abcdef0123"}};
  Launcher node0({ZDP_DP_LAUNCH, job, "--node-rank", "0"}, out("node0.log"), secret);
  Launcher node1({ZDP_DP_LAUNCH, job, "--node-rank", "1"}, out("node1.log"), secret);
  const Exit x1 = node1.wait(60s);
  const Exit x0 = node0.wait(60s);
  EXPECT_EQ(x0.code, 1) << x0.output;
  EXPECT_NE(x0.output.find("the job was stopped: rank 1 (node 1"), std::string::npos) << x0.output;
  EXPECT_NE(x0.output.find("killed by signal 9"), std::string::npos) << x0.output;
  EXPECT_EQ(x0.output.find("dp-launch: rank 0 (node 0"), std::string::npos) << "node 0 blamed its own rank:\n"
                                                                           << x0.output;
  EXPECT_EQ(x1.code, 1) << x1.output;
}

// The ranks get the hard limit on open files as their soft one: two store connections a
// rank on node 0 and a Gloo connection a peer passed a soft limit of 1024 at a few
// hundred ranks.
TEST_F(LauncherSignals, RanksMayOpenAsManyFilesAsTheHardLimitAllows) {
  const std::string job = config(1, "/bin/sh", {"-c", "echo soft=$(ulimit -Sn) hard=$(ulimit -Hn); : " + dir_.path()});
  const Exit x = Launcher({"/bin/bash", "-c", std::string("ulimit -Sn 256 && exec ") + ZDP_DP_LAUNCH + " " + job},
                          out("launch.log"))
                     .wait(30s);
  EXPECT_EQ(x.code, 0) << x.output;
  const size_t at = x.output.find("soft=");
  ASSERT_NE(at, std::string::npos) << x.output;
  const std::string line = x.output.substr(at, x.output.find('\n', at) - at);
  const std::string soft = line.substr(5, line.find(' ') - 5), hard = line.substr(line.find("hard=") + 5);
  EXPECT_EQ(soft, hard) << line;
  EXPECT_NE(soft, "256") << line;
}

// master_addr = "::1": the store listened on 127.0.0.1 only, and the ranks retried
// "connection refused" on ::1 until their timeout.
TEST_F(LauncherSignals, AnIpv6MasterAddrIsWhereTheStoreListens) {
  if (!zdp::testing::has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  const Exit x = Launcher({ZDP_DP_LAUNCH, config(2, ZDP_RANK_PROBE, {"--tag", dir_.path()},
                                                 "master_addr = \"::1\"", 60)},
                          out("launch.log"))
                     .wait(60s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 0) << x.output;
  EXPECT_NE(x.output.find("probe rank 1/2 ok"), std::string::npos) << x.output;
}

// A rank run through a wrapper script: PR_SET_PDEATHSIG kills the script when the launcher
// is SIGKILLed, not the dp-train it started, which trained on (and wrote checkpoints) for
// minutes. Now every rank watches the launcher's lifeline (runtime/internal/lifeline.h)
// and stops its process group when the launcher is gone.
// A wrapper that starts a process of its own and then execs dp-train: PR_SET_PDEATHSIG
// killed dp-train at once, before its watcher could stop the group, and the wrapper's
// process lived on (zdp::init now clears it once the lifeline is watched).
TEST_F(LauncherSignals, ASigkilledLaunchersWrappedRanksStopToo) {
  for (const bool exec_after_a_child : {false, true}) {
    SCOPED_TRACE(exec_after_a_child ? "the wrapper started a child and exec'd dp-train" : "the wrapper runs dp-train");
    expect_a_sigkilled_launchers_ranks_stop(exec_after_a_child);
    if (HasFailure()) return;
  }
}

void LauncherSignals::expect_a_sigkilled_launchers_ranks_stop(bool exec_after_a_child) {
  const std::string wrapper = out(exec_after_a_child ? "wrap-exec.sh" : "wrap.sh");
  if (exec_after_a_child) {
    std::ofstream(wrapper) << "#!/bin/sh\n/bin/sh -c 'sleep 600; : " << dir_.path() << "' &\nexec " << ZDP_DP_TRAIN
                           << " \"$@\"\n";
  } else {
    std::ofstream(wrapper) << "#!/bin/sh\n" << ZDP_DP_TRAIN << " \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  fs::remove_all(out("logs"));  // the last variant's "step " lines
  // The ranks' command lines name this test's folder (TearDown finds what is left).
  const std::string job = config(2, wrapper, {"--set", "launch.log_dir=" + dir_.path() + "/logs"});
  std::ofstream(job, std::ios::app) << "steps = 1000000\nlog_every = 1\n";
  Launcher l({ZDP_DP_LAUNCH, job}, out("launch.log"));
  const auto limit = Clock::now() + 60s;
  while (Clock::now() < limit && read_file(out("logs/rank-0.log")).find("step ") == std::string::npos) {
    std::this_thread::sleep_for(50ms);
  }
  // Killed below either way: an assertion here would leave the job running.
  EXPECT_NE(read_file(out("logs/rank-0.log")).find("step "), std::string::npos) << read_file(out("launch.log"));
  ::kill(l.pid(), SIGKILL);
  l.wait(10s);
  const auto gone_by = Clock::now() + 10s;
  while (Clock::now() < gone_by && !processes_with(dir_.path()).empty()) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(processes_with(dir_.path()).empty()) << "the wrapped ranks outlived their launcher";
  for (const int pid : processes_with(dir_.path())) {  // none left to the next test: their groups (a rank's own) too
    const pid_t group = ::getpgid(pid);
    ::kill(group > 0 && group != ::getpgrp() ? -group : pid, SIGKILL);
  }
}

// The ranks' stdin is /dev/null, not the launcher's terminal: a rank (in its own process
// group) that read it was stopped by SIGTTIN without a word.
TEST_F(LauncherSignals, TheRanksReadNothingFromTheLaunchersTerminal) {
  const Exit x = Launcher({ZDP_DP_LAUNCH, config(1, "/bin/sh", {"-c", "echo stdin=$(readlink /proc/self/fd/0); : " +
                                                                          dir_.path()})},
                          out("launch.log"))
                     .wait(30s);
  EXPECT_EQ(x.code, 0) << x.output;
  EXPECT_NE(x.output.find("stdin=/dev/null"), std::string::npos) << x.output;
}

// A descriptor dp-launch's caller left open (here the write end of a pipe, as a harness
// that waits for its end holds) reached every rank and what the ranks started, which then
// held it past the launcher; /dev/null's descriptor of the launcher's too.
TEST_F(LauncherSignals, TheRanksInheritNoDescriptorOfTheLaunchersCaller) {
  // A kernel before 5.11 has no CLOSE_RANGE_CLOEXEC: the launcher leaves them as before.
  if (::close_range(1u << 30, 1u << 30, CLOSE_RANGE_CLOEXEC) != 0) GTEST_SKIP() << "no close_range(CLOEXEC) here";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);  // not close-on-exec: dp-launch inherits both ends
  constexpr int kCallers = 201;
  ASSERT_EQ(::dup2(fds[1], kCallers), kCallers);
  const Exit x = Launcher({ZDP_DP_LAUNCH, config(1, "/bin/sh", {"-c", "if test -e /proc/self/fd/201; then echo caller=kept; "
                                                                          "else echo caller=closed; fi; : " + dir_.path()})},
                          out("launch.log"))
                     .wait(30s);
  for (const int fd : {fds[0], fds[1], kCallers}) ::close(fd);
  EXPECT_EQ(x.code, 0) << x.output;
  EXPECT_NE(x.output.find("caller=closed"), std::string::npos) << x.output;
}

// nohup (SIGHUP ignored from the start) keeps a job through a closed session: the
// launcher installed its handler over it and stopped the job on SIGHUP.
TEST_F(LauncherSignals, SighupIgnoredFromTheStartStaysIgnored) {
  const std::string job = config(1, "/bin/sh", {"-c", "sleep 60; : " + dir_.path()});
  Launcher l({"/bin/bash", "-c", std::string("trap '' HUP; exec ") + ZDP_DP_LAUNCH + " " + job}, out("launch.log"));
  await_output(out("logs/rank-0.log"));
  std::this_thread::sleep_for(300ms);
  ::kill(l.pid(), SIGHUP);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(::waitpid(l.pid(), nullptr, WNOHANG), 0) << "SIGHUP stopped a launcher that inherited it ignored";
  ::kill(l.pid(), SIGTERM);
  const Exit x = l.wait(30s);
  EXPECT_EQ(x.code, 128 + SIGTERM) << x.output;
}

// dp-launch scale runs each world size through a dp-launch of its own. With SIGCHLD
// inherited as ignored, a failed run read as exit 0 (and an earlier run's summary as its
// figures); a SIGTERM to scale alone left that dp-launch and its ranks running.
TEST_F(LauncherSignals, ScaleSeesAFailedRunAndPassesItsStopOn) {
  const std::string job = config(1, "/bin/sh", {"-c", "exit 3; : " + dir_.path()});
  const Exit failed = Launcher({"/bin/bash", "-c", std::string("trap '' CHLD; exec ") + ZDP_DP_LAUNCH + " scale " + job +
                                                       " --world 1 --steps 3"},
                               out("scale-failed.log"))
                          .wait(60s);
  EXPECT_EQ(failed.code, 1) << failed.output;
  EXPECT_NE(failed.output.find("the run at world size 1 failed"), std::string::npos) << failed.output;

  const std::string sleeper = config(2, "/bin/sh", {"-c", "sleep 60; : " + dir_.path()});
  Launcher scale({ZDP_DP_LAUNCH, "scale", sleeper, "--world", "2", "--steps", "3"}, out("scale.log"));
  await_output(out("logs/scale/world-2/rank-1.log"));
  std::this_thread::sleep_for(300ms);
  ::kill(scale.pid(), SIGTERM);
  const Exit x = scale.wait(30s);
  EXPECT_FALSE(x.hung) << x.output;
  EXPECT_EQ(x.code, 128 + SIGTERM) << x.output;
  EXPECT_NE(x.output.find("passed on to the run"), std::string::npos) << x.output;
  // TearDown: the run's dp-launch and ranks are gone too.
}

}  // namespace
