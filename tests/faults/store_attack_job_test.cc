// A whole dp-launch job while its store is attacked from the same machine: hundreds of
// idle connections, connections announcing 64 MiB frames, and a flood of wrong secrets.
// The job must finish byte-identical to an unattacked run, the launcher's memory must
// stay bounded (its peak RSS is measured in both runs and printed), and the refusals
// must take a few log lines, not one per attempt.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/faults/fault_jobs.h"
#include "zdp/tcp_store.h"

namespace zdp::testing {
namespace {

namespace fs = std::filesystem;
constexpr int kSteps = 30;

int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Attack {
  std::atomic<bool> stop{false};
  std::atomic<long> idle_opened{0}, big_headers{0}, wrong_secrets{0};
  std::vector<std::thread> threads;

  void start(int port) {
    // Idle connections: keep 300 open, replacing those the server closes.
    threads.emplace_back([this, port] {
      std::deque<int> fds;
      while (!stop) {
        const int fd = raw_connect(port);
        if (fd < 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        ++idle_opened;
        fds.push_back(fd);
        if (fds.size() > 300) {
          ::close(fds.front());
          fds.pop_front();
        }
      }
      for (const int fd : fds) ::close(fd);
    });
    // 4-byte headers announcing 64 MiB, 16 connections at a time.
    threads.emplace_back([this, port] {
      const std::string header("\x00\x00\x00\x04", 4);
      std::deque<int> fds;
      while (!stop) {
        const int fd = raw_connect(port);
        if (fd < 0 || ::send(fd, header.data(), 4, MSG_NOSIGNAL) != 4) {
          if (fd >= 0) ::close(fd);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        ++big_headers;
        fds.push_back(fd);
        if (fds.size() > 16) {
          ::close(fds.front());
          fds.pop_front();
        }
      }
      for (const int fd : fds) ::close(fd);
    });
    // Wrong secrets, as fast as the server answers.
    threads.emplace_back([this, port] {
      while (!stop) {
        auto c = TcpStoreClient::connect("127.0.0.1", port, std::chrono::milliseconds(200),
                                         "guess-" + std::to_string(wrong_secrets.load()));
        if (!c.ok() && c.status().code() == StatusCode::kInvalidArgument) ++wrong_secrets;
      }
    });
  }
  void finish() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

TEST(StoreAttackJob, AnAttackedJobFinishesByteIdenticalWithBoundedLauncherMemory) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);

  TempDir calm_dir, attacked_dir;
  const JobRun calm = run_job({ZDP_DP_LAUNCH, write_job_config(calm_dir.path(), free_port(), kSteps)});
  ASSERT_EQ(calm.exit_code, 0) << calm.output();

  const int port = free_port();
  const std::string config = write_job_config(attacked_dir.path(), port, kSteps);
  Attack attack;
  attack.start(port);  // before the launcher: the attack is on from the store's first moment
  const JobRun attacked = run_job({ZDP_DP_LAUNCH, config});
  attack.finish();

  std::printf("launcher peak RSS: %ld MiB calm, %ld MiB attacked; peak anonymous memory %ld MiB calm, %ld MiB "
              "attacked (%ld idle connections, %ld 64 MiB headers, %ld wrong secrets during a %.1f s job)\n",
              calm.peak_rss_kib / 1024, attacked.peak_rss_kib / 1024, calm.peak_anon_kib / 1024,
              attacked.peak_anon_kib / 1024, attack.idle_opened.load(),
              attack.big_headers.load(), attack.wrong_secrets.load(), attacked.seconds);
  ASSERT_EQ(attacked.exit_code, 0) << attacked.output();
  EXPECT_GT(attack.big_headers.load(), 16);
  // The attack reached the server (not a rate): 7,000-8,800 refusals alone, 35 once
  // with the whole suite running beside it (each try then met the flood's full queue).
  EXPECT_GT(attack.wrong_secrets.load(), 10);
  const fs::path step = fs::path("ckpt") / ("step-" + std::to_string(kSteps));
  EXPECT_TRUE(same_checkpoint(fs::path(calm_dir.path()) / step, fs::path(attacked_dir.path()) / step));
  // Before the fix 16 such headers took the launcher from 164 MB to 1.2 GB. Anonymous
  // memory, not VmHWM: the resident share of the launcher's shared libraries (CUDA's
  // among them) moved VmHWM by 60 MiB between two calm runs on a loaded machine.
  EXPECT_GT(calm.peak_anon_kib, 0);
  EXPECT_LT(attacked.peak_anon_kib, calm.peak_anon_kib + 32 * 1024);
  int refusal_lines = 0;
  for (const TimedLine& l : attacked.lines) refusal_lines += l.text.find(": refused ") != std::string::npos ? 1 : 0;
  EXPECT_LE(refusal_lines, 2 * (static_cast<int>(attacked.seconds / 10) + 1)) << attacked.output();
}

}  // namespace
}  // namespace zdp::testing
