// testing/fork_ranks: the ranks meet through a store served by a process of its own, the
// caller stays single-threaded, a threaded caller is refused (naming its threads) instead
// of forking children that could hang on an inherited lock, and nothing outlives a call.
#include "testing/fork_ranks.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "testing/temp_dir.h"

namespace zdp::testing {
namespace {

using namespace std::chrono_literals;

// The processes whose parent is this one (from /proc), as "pid pid ...".
std::string children() {
  std::string out;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::string state, ppid;
    std::istringstream(line.substr(close + 1)) >> state >> ppid;
    if (ppid == self) out += pid + " ";
  }
  return out;
}

int threads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.exists() ? 1 : 0;
  return n;
}

TEST(ForkRanks, RanksMeetThroughTheStoreAndLeaveNothingRunning) {
  const auto results = fork_ranks(3, [](int rank, int world, Store& store) -> Status {
    ZDP_ASSIGN_OR_RETURN(int64_t n, store.add("count", 1));
    if (n < 1 || n > world) return Status(StatusCode::kInternal, "count " + std::to_string(n));
    ZDP_RETURN_IF_ERROR(store.set("rank" + std::to_string(rank), "here"));
    return store.wait({"rank0", "rank1", "rank2"}, 20s);
  });
  EXPECT_EQ(describe_failures(results), "");
  EXPECT_EQ(threads(), 1) << "fork_ranks started a thread in the caller";
  EXPECT_EQ(children(), "") << "a rank or the store server outlived fork_ranks";
}

TEST(ForkRanks, EachRanksOutcomeIsItsOwn) {
  ForkOptions options;
  options.deadline = 3s;
  const auto results = fork_ranks(3, [](int rank, int, Store&) -> Status {
    if (rank == 1) return Status(StatusCode::kInternal, "rank 1 fails on purpose");
    if (rank == 2) std::this_thread::sleep_for(60s);
    return Status::Ok();
  }, options);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok()) << results[0].describe();
  EXPECT_EQ(results[1].describe(), "rank 1: exit 1");
  EXPECT_TRUE(results[2].timed_out) << results[2].describe();
  EXPECT_EQ(results[2].describe(), "rank 2: still running at the deadline, killed");
  EXPECT_EQ(children(), "");
}

TEST(ForkRanks, RefusesACallerWithThreadsAndNamesThem) {
  TempDir dir;
  const std::string marker = dir.path() + "/ran";
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  const auto refused = fork_ranks(2, [&](int rank, int, Store&) -> Status {
    std::ofstream(marker + std::to_string(rank)) << "ran";
    return Status::Ok();
  });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  other.join();
  ASSERT_EQ(refused.size(), 2u);
  for (const RankResult& r : refused) {
    EXPECT_FALSE(r.ok());
    EXPECT_NE(r.describe().find("rank " + std::to_string(r.rank) +
                                ": not started: fork_ranks needs a single-threaded caller"),
              std::string::npos)
        << r.describe();
    EXPECT_NE(r.describe().find("this process runs 1 other thread(s): "), std::string::npos) << r.describe();
  }
  EXPECT_FALSE(std::filesystem::exists(marker + "0"));
  EXPECT_EQ(children(), "");

  // Once the thread is gone the same call runs.
  const auto ran = fork_ranks(2, [&](int rank, int, Store&) -> Status {
    std::ofstream(marker + std::to_string(rank)) << "ran";
    return Status::Ok();
  });
  EXPECT_EQ(describe_failures(ran), "");
  EXPECT_TRUE(std::filesystem::exists(marker + "0"));
  EXPECT_TRUE(std::filesystem::exists(marker + "1"));
}

}  // namespace
}  // namespace zdp::testing
