// A job-store connection after a break (runtime/internal/reconnecting_store.h): a
// request that finds the connection broken connects again and runs once more; add is not
// run twice; a store that cannot be reached again is an error naming both failures.
#include "runtime/internal/reconnecting_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

namespace zdp {
namespace {

using namespace std::chrono_literals;

// A connection to `target` that breaks after `good` requests, as a TCP store client does
// after a transport timeout: every later request answers kIoError.
class Connection final : public Store {
 public:
  Connection(Store& target, int good) : target_(target), good_(good) {}
  Status set(const std::string& k, const std::string& v) override { return ok() ? target_.set(k, v) : broken(); }
  StatusOr<std::string> get(const std::string& k, std::chrono::milliseconds t) override {
    if (!ok()) return broken();
    return target_.get(k, t);
  }
  StatusOr<int64_t> add(const std::string& k, int64_t d) override {
    if (!ok()) return broken();
    return target_.add(k, d);
  }
  Status wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    return ok() ? target_.wait(k, t) : broken();
  }
  StatusOr<bool> check(const std::vector<std::string>& k) override {
    if (!ok()) return broken();
    return target_.check(k);
  }

 private:
  bool ok() { return good_-- > 0; }
  static Status broken() { return Status(StatusCode::kIoError, "store at node0:29500: the connection is broken"); }
  Store& target_;
  int good_;
};

TEST(ReconnectingStore, ABrokenConnectionIsMadeAgainAndTheRequestRunsOnce) {
  InMemoryStore job;
  int connects = 0;
  ReconnectingStore store(std::make_unique<Connection>(job, 1), [&](std::chrono::milliseconds) {
    ++connects;
    return StatusOr<std::unique_ptr<Store>>(std::unique_ptr<Store>(new Connection(job, 1000)));
  }, 5s, "test");
  ASSERT_TRUE(store.set("a", "1").ok());     // the first connection's one good request
  ASSERT_TRUE(store.set("b", "2").ok());     // breaks, connects again, runs on the new one
  EXPECT_EQ(store.get("b", 0ms).value(), "2");
  EXPECT_TRUE(store.check({"a", "b"}).value());
  EXPECT_EQ(connects, 1);
  EXPECT_EQ(store.reconnections(), 1);
  // A missing key is no broken connection: no reconnection.
  EXPECT_EQ(store.get("missing", 10ms).status().code(), StatusCode::kTimeout);
  EXPECT_EQ(store.reconnections(), 1);
}

TEST(ReconnectingStore, AddIsNotRunTwice) {
  InMemoryStore job;
  ReconnectingStore store(std::make_unique<Connection>(job, 0), [&](std::chrono::milliseconds) {
    return StatusOr<std::unique_ptr<Store>>(std::unique_ptr<Store>(new Connection(job, 1000)));
  }, 5s, "test");
  EXPECT_EQ(store.add("n", 1).status().code(), StatusCode::kIoError);  // may have been applied: not retried
  EXPECT_EQ(store.reconnections(), 1);
  EXPECT_EQ(store.add("n", 1).value(), 1);
}

TEST(ReconnectingStore, AStoreThatCannotBeReachedAgainIsAnErrorNamingBoth) {
  InMemoryStore job;
  ReconnectingStore store(std::make_unique<Connection>(job, 0), [&](std::chrono::milliseconds within) {
    return StatusOr<std::unique_ptr<Store>>(Status(StatusCode::kTimeout, "cannot connect within " +
                                                                             std::to_string(within.count()) + " ms"));
  }, 1500ms, "test");
  const Status s = store.check({"a"}).status();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("the connection is broken; connecting again failed too: cannot connect within 1500 ms"),
            std::string::npos) << s.message();
}

// After a failed reconnection, the calls of the next `patience` fail at once with its
// error: the launcher reads a heartbeat per rank, and each waited `patience` (30 s) again.
TEST(ReconnectingStore, AFailedReconnectionIsNotTriedAgainAtOnce) {
  InMemoryStore job;
  int attempts = 0;
  bool reachable = false;
  ReconnectingStore store(std::make_unique<Connection>(job, 0), [&](std::chrono::milliseconds) {
    ++attempts;
    if (reachable) return StatusOr<std::unique_ptr<Store>>(std::make_unique<Connection>(job, 1000));
    return StatusOr<std::unique_ptr<Store>>(Status(StatusCode::kTimeout, "cannot connect"));
  }, 200ms, "test");
  for (int rank = 0; rank < 8; ++rank) EXPECT_FALSE(store.check({"beat/" + std::to_string(rank)}).ok());
  EXPECT_EQ(attempts, 1);
  // Once `patience` has passed, the next call tries again (the store may be back).
  reachable = true;
  std::this_thread::sleep_for(250ms);
  EXPECT_TRUE(store.set("a", "1").ok());
  EXPECT_EQ(attempts, 2);
  EXPECT_TRUE(store.check({"a"}).value());
}

}  // namespace
}  // namespace zdp
