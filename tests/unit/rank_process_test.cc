// RankProcess::spawn in a threaded launcher: between fork and exec the child may make
// only async-signal-safe calls (docs/design.md, "Fork safety"). Here other threads keep
// the logger's lock and the allocator busy while ranks are spawned; a child that logged
// or took a lock before exec would, now and then, inherit it held and never reach exec,
// and spawn reports that (its exec deadline) instead of hanging.
#include "launcher/rank_process.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "zdp/log.h"

namespace zdp::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Polls `p` until it exits (true) or `limit` passes (false).
bool wait_exit(RankProcess& p, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!p.poll().exited) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Sends this process's stderr to /dev/null while it lives (the noisy logger below).
class QuietStderr {
 public:
  QuietStderr() : saved_(::dup(STDERR_FILENO)) {
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  ~QuietStderr() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }

 private:
  int saved_;
};

TEST(RankProcess, SpawnsWhileOtherThreadsHoldTheLoggersLockAndAllocate) {
  constexpr int kSpawns = 300;
  std::string failure;
  int spawned = 0;
  {
    QuietStderr quiet;
    std::atomic<bool> stop{false};
    std::vector<std::thread> busy;
    for (int t = 0; t < 2; ++t) {
      busy.emplace_back([&stop, t] {
        int i = 0;
        while (!stop.load()) {
          set_process_identity(t, 2);  // the identity lock every log line takes
          ++i;
          ZDP_LOG(kWarn) << "busy thread " << t << " line " << i << " " << std::string(static_cast<size_t>(i % 512), 'x');
        }
      });
    }
    busy.emplace_back([&stop] {
      std::vector<std::unique_ptr<char[]>> blocks;
      for (size_t i = 0; !stop.load(); ++i) {
        blocks.emplace_back(new char[16 + (i * 7919) % 65536]);
        if (blocks.size() > 64) blocks.clear();
      }
    });
    for (; spawned < kSpawns && failure.empty(); ++spawned) {
      RankSpec spec;
      spec.rank = spawned;
      spec.argv = {"true"};  // found through PATH before the fork
      spec.env = {{"ZDP_TEST_SPAWN", std::to_string(spawned)}};
      StatusOr<RankProcess> p = RankProcess::spawn(spec);
      if (!p.ok()) {
        failure = p.status().to_string();
      } else if (!wait_exit(*p, std::chrono::seconds(30))) {
        failure = "rank " + std::to_string(spawned) + " (pid " + std::to_string(p->pid()) + ") still running after 30 s";
      } else if (!p->exit_info().ok()) {
        failure = "rank " + std::to_string(spawned) + ": " + p->exit_info().describe();
      }
    }
    stop = true;
    for (std::thread& t : busy) t.join();
  }
  EXPECT_EQ(failure, "") << "after " << spawned << " spawns";
  EXPECT_EQ(spawned, kSpawns);
}

TEST(RankProcess, AProgramMissingFromPathIsNamedBeforeAnyFork) {
  RankSpec spec;
  spec.rank = 3;
  spec.argv = {"zdp-no-such-program"};
  StatusOr<RankProcess> p = RankProcess::spawn(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("rank 3: cannot run 'zdp-no-such-program': no executable of that name in PATH"),
            std::string::npos)
      << p.status().to_string();
}

TEST(RankProcess, AnExecFailureIsReportedWithItsReason) {
  RankSpec spec;
  spec.rank = 1;
  spec.argv = {"/proc/self/zdp-not-there"};
  StatusOr<RankProcess> p = RankProcess::spawn(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("rank 1: cannot run '/proc/self/zdp-not-there': No such file or directory"),
            std::string::npos)
      << p.status().to_string();
}

TEST(RankProcess, TheChildGetsItsArgumentsAndEnvironment) {
  RankSpec spec;
  spec.rank = 0;
  spec.argv = {"sh", "-c", "test \"$1\" = two && test \"$ZDP_TEST_VALUE\" = 42", "sh", "two"};
  spec.env = {{"ZDP_TEST_VALUE", "42"}};
  StatusOr<RankProcess> p = RankProcess::spawn(spec);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE(wait_exit(*p, std::chrono::seconds(30)));
  EXPECT_TRUE(p->exit_info().ok()) << p->exit_info().describe();
}

}  // namespace
}  // namespace zdp::launcher
