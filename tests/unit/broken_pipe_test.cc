// core/internal/broken_pipe.h: SIGPIPE caught by a do-nothing handler, so a write to a
// closed pipe fails with EPIPE and the programs the process starts keep the default. Each
// test runs in a forked child: the disposition is per process.
#include "core/internal/broken_pipe.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

extern char** environ;

namespace zdp {
namespace {

// Runs `body` in a forked child; its return is the child's exit status. Returns the status
// waitpid reported, so a child killed by a signal shows as such.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// Whether a program started now (posix_spawn, which keeps ignored signals ignored as exec
// does) has SIGPIPE ignored: the SigIgn mask of /proc/self/status, as `sh` reads it.
int started_program_ignores_sigpipe() {
  int fds[2];
  if (::pipe(fds) != 0) return 2;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char script[] = "sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status";
  char* argv[] = {sh, dash_c, script, nullptr};
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, sh, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (err != 0) return 2;
  std::string out;
  char buf[128];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  if (out.empty()) return 2;
  const unsigned long long mask = std::strtoull(out.c_str(), nullptr, 16);
  return (mask >> (SIGPIPE - 1)) & 1 ? 1 : 0;
}

TEST(BrokenPipe, AWriteToAClosedPipeFailsWithEpipeInsteadOfEndingTheProcess) {
  const int status = in_child([] {
    if (!survive_broken_pipes()) return 3;
    int fds[2];
    if (::pipe(fds) != 0) return 2;
    ::close(fds[0]);
    const ssize_t n = ::write(fds[1], "x", 1);
    return n == -1 && errno == EPIPE ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(BrokenPipe, ProgramsStartedAfterwardsKeepTheDefault) {
  const int caught = in_child([] { return survive_broken_pipes() ? started_program_ignores_sigpipe() : 3; });
  ASSERT_TRUE(WIFEXITED(caught));
  EXPECT_EQ(WEXITSTATUS(caught), 0) << "a program started after survive_broken_pipes() has SIGPIPE ignored";
  // What the test tells apart: SIG_IGN, which zdp used before, is inherited.
  const int ignored = in_child([] {
    ::signal(SIGPIPE, SIG_IGN);
    return started_program_ignores_sigpipe();
  });
  ASSERT_TRUE(WIFEXITED(ignored));
  EXPECT_EQ(WEXITSTATUS(ignored), 1);
}

TEST(BrokenPipe, AProgramsOwnChoiceStands) {
  const int status = in_child([] {
    ::signal(SIGPIPE, SIG_IGN);
    if (!survive_broken_pipes()) return 3;
    struct sigaction now {};
    ::sigaction(SIGPIPE, nullptr, &now);
    return now.sa_handler == SIG_IGN ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace zdp
