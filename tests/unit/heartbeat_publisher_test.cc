// A rank's heartbeat thread when its store connection breaks. One transport timeout breaks
// a TCP store connection for good; the thread used to end there, saying so only at debug
// level, and the launcher then declared a healthy rank stalled. It now connects again and
// goes on beating; a store that stays broken is tried every second.
#include "runtime/src/context/heartbeat_publisher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "runtime/internal/heartbeat.h"
#include "runtime/internal/reconnecting_store.h"
#include "zdp/store.h"

namespace zdp::detail {
namespace {

using namespace std::chrono_literals;

// A connection that broke: every request fails as a broken TCP store client's does.
class BrokenStore final : public Store {
 public:
  Status set(const std::string&, const std::string&) override { return broken(); }
  StatusOr<std::string> get(const std::string&, std::chrono::milliseconds) override { return broken(); }
  StatusOr<int64_t> add(const std::string&, int64_t) override { return broken(); }
  Status wait(const std::vector<std::string>&, std::chrono::milliseconds) override { return broken(); }
  StatusOr<bool> check(const std::vector<std::string>&) override { return broken(); }

 private:
  static Status broken() { return Status(StatusCode::kIoError, "store at 127.0.0.1:1: the connection is broken"); }
};

// A new connection to `target` (the store every connection reaches).
class Connection final : public Store {
 public:
  explicit Connection(Store& target) : target_(target) {}
  Status set(const std::string& k, const std::string& v) override { return target_.set(k, v); }
  StatusOr<std::string> get(const std::string& k, std::chrono::milliseconds t) override { return target_.get(k, t); }
  StatusOr<int64_t> add(const std::string& k, int64_t d) override { return target_.add(k, d); }
  Status wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { return target_.wait(k, t); }
  StatusOr<bool> check(const std::vector<std::string>& k) override { return target_.check(k); }

 private:
  Store& target_;
};

bool beats_within(Store& store, int rank, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    StatusOr<bool> there = store.check({heartbeat_keys::beat(rank)});
    if (there.ok() && *there) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(HeartbeatPublisher, ABrokenConnectionIsReplacedAndTheBeatsGoOn) {
  InMemoryStore job;
  int attempts = 0;
  auto progress = std::make_shared<RankProgress>();
  {
    // As start() makes it: the broken connection inside a ReconnectingStore.
    auto store = std::make_unique<ReconnectingStore>(
        std::make_unique<BrokenStore>(),
        [&](std::chrono::milliseconds) -> StatusOr<std::unique_ptr<Store>> {
          // The first try fails too (the store is still unreachable).
          if (++attempts == 1) return Status(StatusCode::kTimeout, "cannot connect yet");
          return std::unique_ptr<Store>(new Connection(job));
        },
        2s, "rank 3's heartbeat");
    HeartbeatPublisher beating(std::move(store), 3, 50ms, progress);
    EXPECT_TRUE(beats_within(job, 3, 10s)) << "no beat reached the store after the connection broke";
  }
  EXPECT_EQ(attempts, 2);
  StatusOr<std::string> beat = job.get(heartbeat_keys::beat(3), 0ms);
  ASSERT_TRUE(beat.ok());
  EXPECT_TRUE(decode_heartbeat(*beat).ok());
}

// A store that stays broken is tried every second; the thread still stops at once.
TEST(HeartbeatPublisher, AStoreThatStaysBrokenIsRetriedAndTheThreadStopsAtOnce) {
  auto progress = std::make_shared<RankProgress>();
  const auto start = std::chrono::steady_clock::now();
  {
    HeartbeatPublisher beating(std::make_unique<BrokenStore>(), 0, 50ms, progress);
    std::this_thread::sleep_for(1500ms);  // in its wait between tries
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms + 500ms) << "the destructor waited out a retry";
}

}  // namespace
}  // namespace zdp::detail
