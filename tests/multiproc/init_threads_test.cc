// zdp::init splits the host's usable cores among the ranks on it when no launcher set
// OMP_NUM_THREADS (ranks started by hand or by srun without binding each ran a thread per
// core: cores x ranks threads). Two real rank processes on loopback.
#include <gtest/gtest.h>

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "core/internal/usable_cpus.h"
#include "testing/free_port.h"
#include "zdp/comm.h"
#include "zdp/context.h"
#include "zdp/device.h"

namespace zdp {
namespace {

TEST(InitThreads, RanksWithoutALauncherSplitTheCores) {
  const int port = testing::free_port();
  const int expected = std::max(1, usable_cpu_cores() / 2);
  pid_t children[2];
  for (int r = 0; r < 2; ++r) {
    children[r] = ::fork();
    ASSERT_GE(children[r], 0);
    if (children[r] == 0) {
      ::unsetenv("OMP_NUM_THREADS");
      for (const char* name : {"ZDP_LAUNCHER", "ZDP_CONFIG", "ZDP_JOB_SECRET", "ZDP_LIFELINE_FD"}) ::unsetenv(name);
      const std::string rank = std::to_string(r);
      ::setenv("RANK", rank.c_str(), 1);
      ::setenv("LOCAL_RANK", rank.c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("LOCAL_WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      InitOptions options;
      options.backend = Backend::kGloo;
      StatusOr<Context> ctx = init(options);
      if (!ctx.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, ctx.status().to_string().c_str());
        ::_exit(2);
      }
      const int threads = omp_get_max_threads();
      if (threads != expected) std::fprintf(stderr, "rank %d: %d threads, expected %d\n", r, threads, expected);
      // Neither rank leaves before both are up (a rank that exited during the other's
      // rendezvous failed it).
      StatusOr<std::unique_ptr<Stream>> stream = ctx->device().create_stream("barrier");
      Status met = stream.status();
      if (met.ok()) met = ctx->comm().barrier(**stream);
      if (met.ok()) met = (*stream)->synchronize(std::chrono::seconds(60));
      if (!met.ok()) std::fprintf(stderr, "rank %d: %s\n", r, met.to_string().c_str());
      ::_exit(!met.ok() ? 2 : threads == expected ? 0 : 1);
    }
  }
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the rank kept another thread count; 2: init failed";
  }
}

// launch.socket_ifname reaches NCCL's bootstrap (NCCL_SOCKET_IFNAME) in a rank no dp-launch
// started, as dp-launch passes it: under torchrun or srun the key did nothing for NCCL. A
// value already in the environment stays.
TEST(InitThreads, ARankWithoutALauncherGivesNcclTheConfiguredInterface) {
  for (const char* before : {"", "eth7"}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (const char* name : {"ZDP_LAUNCHER", "ZDP_CONFIG", "ZDP_JOB_SECRET", "ZDP_LIFELINE_FD", "RANK", "WORLD_SIZE",
                               "NCCL_SOCKET_IFNAME"}) {
        ::unsetenv(name);
      }
      if (*before != '\0') ::setenv("NCCL_SOCKET_IFNAME", before, 1);
      InitOptions options;
      options.backend = Backend::kGloo;
      options.overrides = {"launch.socket_ifname=\"lo\""};
      StatusOr<Context> ctx = init(options);
      if (!ctx.ok()) ::_exit(2);
      const char* v = std::getenv("NCCL_SOCKET_IFNAME");
      ::_exit(v != nullptr && std::string(v) == (*before != '\0' ? before : "lo") ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "before: '" << before << "'; 1: NCCL_SOCKET_IFNAME not as expected; 2: init failed";
  }
}

}  // namespace
}  // namespace zdp
