// Rendezvous store: one typed suite over InMemoryStore and the TCP client (the Store
// interface and PrefixStore), and the shared timeout message. The TCP server and client
// on their own: tcp_store_test; the wire codec: tcp_store_protocol_test.
#include "zdp/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testing/tcp_store_helpers.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::connect_client;
using testing::kLong;
using testing::start_server;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- one suite, both stores ----------------------------------------------------------

// Ranks as threads share one InMemoryStore.
class InMemoryBackend {
 public:
  void set_up() {}
  Store& store() { return store_; }
  Store& another() { return store_; }

 private:
  InMemoryStore store_;
};

// Every "rank" gets its own connection to one server.
class TcpBackend {
 public:
  void set_up() {
    server_ = start_server();
    ASSERT_NE(server_, nullptr);
    clients_.push_back(connect_client(server_->port()));
    ASSERT_NE(clients_.back(), nullptr);
  }
  Store& store() { return *clients_.front(); }
  Store& another() {
    clients_.push_back(connect_client(server_->port()));
    return *clients_.back();
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<std::unique_ptr<TcpStoreClient>> clients_;
};

template <typename Backend>
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { backend_.set_up(); }
  Store& store() { return backend_.store(); }
  Store& another() { return backend_.another(); }
  Backend backend_;
};

using Backends = ::testing::Types<InMemoryBackend, TcpBackend>;
TYPED_TEST_SUITE(StoreTest, Backends);

TYPED_TEST(StoreTest, SetThenGet) {
  ASSERT_TRUE(this->store().set("k", "v1").ok());
  auto value = this->store().get("k", milliseconds(0));
  ASSERT_TRUE(value.ok()) << value.status().to_string();
  EXPECT_EQ(*value, "v1");
}

TYPED_TEST(StoreTest, SetOverwrites) {
  ASSERT_TRUE(this->store().set("k", "old").ok());
  ASSERT_TRUE(this->store().set("k", "new").ok());
  EXPECT_EQ(this->store().get("k", kLong).value(), "new");
}

TYPED_TEST(StoreTest, ValuesAreBinarySafe) {
  const std::string binary("a\0b\xff\n", 5);
  ASSERT_TRUE(this->store().set("bin", binary).ok());
  ASSERT_TRUE(this->store().set("empty", "").ok());
  EXPECT_EQ(this->another().get("bin", kLong).value(), binary);
  EXPECT_EQ(this->store().get("empty", kLong).value(), "");
}

TYPED_TEST(StoreTest, GetWaitsForALaterSetFromAnotherThread) {
  Store& writer = this->another();
  const auto start = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_TRUE(writer.set("late", "here").ok());
  });
  auto value = this->store().get("late", kLong);
  const double waited = seconds_since(start);
  t.join();
  ASSERT_TRUE(value.ok()) << value.status().to_string();
  EXPECT_EQ(*value, "here");
  EXPECT_GE(waited, 0.15);
  EXPECT_LT(waited, 3.0);
}

TYPED_TEST(StoreTest, AddStoresDecimalText) {
  EXPECT_EQ(this->store().add("counter", 5).value(), 5);
  EXPECT_EQ(this->store().get("counter", kLong).value(), "5");
  EXPECT_EQ(this->store().add("counter", -7).value(), -2);
  EXPECT_EQ(this->store().get("counter", kLong).value(), "-2");
  ASSERT_TRUE(this->store().set("preset", "40").ok());
  EXPECT_EQ(this->store().add("preset", 2).value(), 42);
}

TYPED_TEST(StoreTest, AddOnNonIntegerIsInvalidArgument) {
  ASSERT_TRUE(this->store().set("text", "12abc").ok());
  auto r = this->store().add("text", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("text"));
  EXPECT_EQ(this->store().get("text", kLong).value(), "12abc");  // left untouched
  ASSERT_TRUE(this->store().set("big", "9223372036854775807").ok());
  EXPECT_EQ(this->store().add("big", 1).status().code(), StatusCode::kInvalidArgument);
}

// Every add returns a distinct new value, so the returned values are exactly 1..N*M.
TYPED_TEST(StoreTest, AddFromManyThreadsIsExact) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 250;
  std::vector<Store*> stores;
  for (int i = 0; i < kThreads; ++i) stores.push_back(&this->another());
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kAdds; ++j) {
        auto r = stores[i]->add("hits", 1);
        seen[i].push_back(r.ok() ? *r : -1);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kAdds);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int64_t>(i) + 1;
  EXPECT_EQ(all, expected);
  EXPECT_EQ(this->store().get("hits", kLong).value(), std::to_string(kThreads * kAdds));
}

TYPED_TEST(StoreTest, WaitReturnsOnceEveryKeyIsSet) {
  Store& writer = this->another();
  std::thread t([&] {
    for (const char* key : {"a", "b", "c"}) {
      std::this_thread::sleep_for(milliseconds(50));
      EXPECT_TRUE(writer.set(key, "x").ok());
    }
  });
  const Status s = this->store().wait({"a", "b", "c"}, kLong);
  t.join();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(this->store().check({"a", "b", "c"}).value());
}

TYPED_TEST(StoreTest, WaitOnNoKeysReturnsAtOnce) {
  const auto start = Clock::now();
  EXPECT_TRUE(this->store().wait({}, kLong).ok());
  EXPECT_LT(seconds_since(start), 1.0);
}

TYPED_TEST(StoreTest, WaitTimeoutNamesExactlyTheMissingKeys) {
  ASSERT_TRUE(this->store().set("a", "1").ok());
  const auto start = Clock::now();
  const Status s = this->store().wait({"a", "b", "c"}, milliseconds(500));
  const double waited = seconds_since(start);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("timed out after 0.5 s waiting for store keys: b, c (2 of 3 missing)"));
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 2.5);
}

TYPED_TEST(StoreTest, GetTimeoutNamesTheKey) {
  const auto start = Clock::now();
  auto r = this->store().get("never", milliseconds(200));
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("waiting for store keys: never (1 of 1 missing)"));
  EXPECT_GE(seconds_since(start), 0.2);
}

TYPED_TEST(StoreTest, CheckDoesNotWait) {
  EXPECT_TRUE(this->store().check({}).value());
  EXPECT_FALSE(this->store().check({"x"}).value());
  ASSERT_TRUE(this->store().set("x", "1").ok());
  EXPECT_TRUE(this->store().check({"x"}).value());
  EXPECT_FALSE(this->store().check({"x", "y"}).value());
}

TYPED_TEST(StoreTest, PrefixStoresAreIsolated) {
  PrefixStore job1("job1", this->store());
  PrefixStore job2("job2", this->store());
  ASSERT_TRUE(job1.set("k", "one").ok());
  ASSERT_TRUE(job2.set("k", "two").ok());
  EXPECT_EQ(job1.get("k", kLong).value(), "one");
  EXPECT_EQ(job2.get("k", kLong).value(), "two");
  EXPECT_EQ(this->store().get("job1/k", kLong).value(), "one");
  EXPECT_FALSE(this->store().check({"k"}).value());
  ASSERT_TRUE(job1.set("only1", "x").ok());
  EXPECT_FALSE(job2.check({"only1"}).value());
  EXPECT_EQ(job1.add("n", 3).value(), 3);
  EXPECT_EQ(job2.add("n", 10).value(), 10);
  EXPECT_TRUE(job1.wait({"k", "only1", "n"}, kLong).ok());
}

TYPED_TEST(StoreTest, PrefixStoreTimeoutShowsKeysAsTheCallerNamedThem) {
  PrefixStore run("run/7", this->store());
  ASSERT_TRUE(run.set("a", "1").ok());
  const Status s = run.wait({"a", "b", "c"}, milliseconds(200));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_THAT(s.message(), HasSubstr("store prefix \"run/7\""));
  EXPECT_THAT(s.message(), HasSubstr("waiting for store keys: b, c (2 of 3 missing)"));
  EXPECT_THAT(s.message(), Not(HasSubstr("run/7/")));
  const Status get = run.get("late", milliseconds(100)).status();
  EXPECT_EQ(get.code(), StatusCode::kTimeout);
  EXPECT_THAT(get.message(), HasSubstr("waiting for store keys: late (1 of 1 missing)"));
  EXPECT_THAT(get.message(), Not(HasSubstr("run/7/")));
  ASSERT_TRUE(run.set("text", "abc").ok());
  const Status add = run.add("text", 1).status();
  EXPECT_EQ(add.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(add.message(), HasSubstr("\"text\""));
  EXPECT_THAT(add.message(), Not(HasSubstr("run/7/")));
}

// ---- the shared timeout message ------------------------------------------------------

TEST(StoreTimeoutError, HasTheOneFormat) {
  const Status s = store_timeout_error({"b", "c"}, 3, milliseconds(2000));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(), "timed out after 2.0 s waiting for store keys: b, c (2 of 3 missing)");
}

TEST(StoreTimeoutError, ManyMissingKeysStayOneShortLine) {
  std::vector<std::string> missing;
  for (int i = 0; i < 100; ++i) missing.push_back("rank" + std::to_string(i));
  const Status s = store_timeout_error(missing, 128, milliseconds(300000));
  EXPECT_THAT(s.message(), HasSubstr("timed out after 300.0 s waiting for store keys: rank0, rank1,"));
  EXPECT_THAT(s.message(), HasSubstr("rank15, ... (100 of 128 missing)"));
  EXPECT_THAT(s.message(), Not(HasSubstr("rank16")));
}

}  // namespace
}  // namespace zdp
