// core/internal/standard_fds.h: a process started with a standard descriptor closed gets
// /dev/null there, so the next pipe or socket it opens is numbered above 2.
#include "core/internal/standard_fds.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <string>

namespace zdp {
namespace {

TEST(StandardFds, AClosedStdinIsDevNullAndNewDescriptorsComeAfterIt) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(STDIN_FILENO);
    ::close(STDERR_FILENO);
    if (open_missing_standard_fds() != 2) ::_exit(1);
    if (open_missing_standard_fds() != 0) ::_exit(2);  // nothing left to open
    char target[PATH_MAX] = {};
    if (::readlink("/proc/self/fd/0", target, sizeof(target) - 1) <= 0 || std::string(target) != "/dev/null") ::_exit(3);
    int fds[2];
    if (::pipe(fds) != 0 || fds[0] < 3 || fds[1] < 3) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not both opened, 2: opened again, 3: fd 0 is not /dev/null, 4: a pipe got 0-2";
}

}  // namespace
}  // namespace zdp
