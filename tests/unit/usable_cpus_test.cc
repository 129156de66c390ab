// core/internal/usable_cpus.h: the cores a process may use, from its affinity mask and its
// cgroup's CPU quota.
#include "core/internal/usable_cpus.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace zdp {
namespace {

TEST(UsableCpus, CgroupQuotaLinesAreRoundedUp) {
  EXPECT_EQ(cores_of_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cores_of_cpu_max("150000 100000"), 2);  // 1.5 cores: 2 threads
  EXPECT_EQ(cores_of_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cores_of_cpu_max("max 100000"), -1);
  EXPECT_EQ(cores_of_cpu_max(""), -1);
  EXPECT_EQ(cores_of_cpu_max("-1 100000"), -1);  // cgroup v1's "no quota"
}

// A process bound to one CPU (taskset -c 0) may use one core, whatever the host has.
TEST(UsableCpus, TheAffinityMaskBounds) {
  const int all = usable_cpu_cores();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    cpu_set_t mine;
    if (::sched_getaffinity(0, sizeof(mine), &mine) != 0) ::_exit(3);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mine)) {
        CPU_SET(c, &one);
        break;
      }
    }
    if (::sched_setaffinity(0, sizeof(one), &one) != 0) ::_exit(4);
    ::_exit(usable_cpu_cores() == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: more than one core counted under a one-CPU mask";
}

}  // namespace
}  // namespace zdp
