// dp-launch scale against the signals a terminal and nohup send. Ctrl-C at the terminal
// reaches scale and the dp-launch it runs alike (one foreground process group): scale also
// passed it on, which made it that dp-launch's second signal, and a second signal SIGKILLs
// the ranks at once instead of giving them the stop grace; dp-launch now counts a second
// signal only a second or more after the first (launcher/launch_signals.h). And SIGINT and
// SIGHUP inherited as ignored (`nohup`, a shell's background job) were replaced by scale's
// handler, so a closed session stopped a nohup'd scale run.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "testing/free_port.h"
#include "testing/launcher_harness.h"
#include "testing/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using zdp::testing::Clock;

class ScaleSignals : public ::testing::Test {
 protected:
  // One rank that says it is up, and on SIGINT or SIGTERM takes 2 s to stop (its trap).
  std::string slow_stopping_job() {
    std::ostringstream c;
    c << "[launch]\nnproc_per_node = 1\nprogram = \"/bin/sh\"\nargs = ['-c', 'trap \"sleep 2; echo rank stopped by its "
         "trap; exit 0\" INT TERM; echo rank up; while :; do sleep 0.1; done; : "
      << dir_.path() << "']\nlog_dir = \"" << dir_.path() << "/logs\"\nmaster_port = " << port_
      << "\nstartup_timeout_s = 0\nheartbeat_timeout_s = 0\n[train]\nglobal_batch = 12\n";
    const std::string path = dir_.path() + "/job.toml";
    std::ofstream(path) << c.str();
    return path;
  }
  // Whether the run's rank said it is up within 30 s.
  bool rank_is_up() const {
    const std::string log = dir_.path() + "/logs/scale/world-1/rank-0.log";
    for (const auto limit = Clock::now() + 30s; Clock::now() < limit; std::this_thread::sleep_for(50ms)) {
      std::ifstream f(log);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (text.find("rank up") != std::string::npos) return true;
    }
    return false;
  }
  void TearDown() override {
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(zdp::testing::processes_with(dir_.path()).empty()) << "processes left behind";
    for (const int pid : zdp::testing::processes_with(dir_.path())) ::kill(pid, SIGKILL);
  }

  zdp::testing::TempDir dir_;
  int port_ = zdp::testing::free_port();
};

// Ctrl-C typed into scale's terminal (a pseudo-terminal here, scale in a session of its own
// with it as the controlling terminal): the terminal signals the whole foreground group.
TEST_F(ScaleSignals, CtrlCAtTheTerminalGivesTheRanksTheirStopGrace) {
  if (::access("/usr/bin/setsid", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/setsid";
  const int terminal = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(terminal, 0);
  ASSERT_EQ(::grantpt(terminal), 0);
  ASSERT_EQ(::unlockpt(terminal), 0);
  const std::string pty = ::ptsname(terminal);
  const auto t0 = Clock::now();
  // setsid makes the shell a session leader; opening the pty for stdin makes it the
  // session's controlling terminal, whose foreground group is the session's.
  const zdp::testing::Launcher l = zdp::testing::start_command(
      {"/usr/bin/setsid", "/bin/sh", "-c",
       std::string("exec ") + ZDP_DP_LAUNCH + " scale " + slow_stopping_job() + " --world 1 --steps 3 < " + pty},
      {});
  EXPECT_TRUE(rank_is_up());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(::write(terminal, "\x03", 1), 1);  // Ctrl-C
  const zdp::testing::LaunchRun run = zdp::testing::finish(l, 60s, t0);
  ::close(terminal);
  EXPECT_EQ(run.exit_code, 128 + SIGINT) << run.output;
  EXPECT_EQ(run.output.find("another signal came"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank stopped by its trap"), std::string::npos) << run.output;
}

// `trap '' HUP INT` as nohup and a shell's background job leave them: SIGHUP and SIGINT
// stop nothing; SIGTERM (sent to scale alone) is passed on, the run's only signal.
TEST_F(ScaleSignals, SighupAndSigintInheritedAsIgnoredStayIgnored) {
  const auto t0 = Clock::now();
  const zdp::testing::Launcher l = zdp::testing::start_command(
      {"/bin/bash", "-c",
       std::string("trap '' HUP INT; exec ") + ZDP_DP_LAUNCH + " scale " + slow_stopping_job() + " --world 1 --steps 3"},
      {});
  EXPECT_TRUE(rank_is_up());
  ::kill(l.pid, SIGHUP);
  ::kill(l.pid, SIGINT);
  std::this_thread::sleep_for(1s);
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(l.pid), &info, WEXITED | WNOHANG | WNOWAIT), 0);
  EXPECT_EQ(info.si_pid, 0) << "SIGHUP or SIGINT stopped a scale that inherited them ignored";
  ::kill(l.pid, SIGTERM);
  const zdp::testing::LaunchRun run = zdp::testing::finish(l, 60s, t0);
  EXPECT_EQ(run.exit_code, 128 + SIGTERM) << run.output;
  EXPECT_NE(run.output.find("passed on to the run"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("another signal came"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank stopped by its trap"), std::string::npos) << run.output;
}

}  // namespace
