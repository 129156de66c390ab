// Rendezvous store: one typed suite over InMemoryStore and the TCP client, then the wire
// codec, and TCP behaviour under many clients, bad input, late/missing servers and stop().
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/src/store/tcp_store_protocol.h"
#include "zdp/store.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kLong{5000};  // "succeeds well before this" in tests that must not time out

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A port that was free a moment ago: bind a temporary socket to port 0 and read it back.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::unique_ptr<TcpStoreServer> start_server(int port = 0, int64_t max_message_bytes = 1 << 20) {
  TcpStoreServerOptions options;
  options.port = port;
  options.max_message_bytes = max_message_bytes;
  auto server = TcpStoreServer::start(options);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(*server) : nullptr;
}

std::unique_ptr<TcpStoreClient> connect_client(int port) {
  auto client = TcpStoreClient::connect("127.0.0.1", port, kLong);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(*client) : nullptr;
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

// ---- wire codec ----------------------------------------------------------------------

std::vector<tcp_store::Request> sample_requests() {
  using tcp_store::Op;
  std::vector<tcp_store::Request> out(5);
  out[0].op = Op::kSet, out[0].key = "key", out[0].value = std::string("v\0al", 4);
  out[1].op = Op::kGet, out[1].key = "g", out[1].number = 1500;
  out[2].op = Op::kAdd, out[2].key = "n", out[2].number = -3;
  out[3].op = Op::kWait, out[3].keys = {"a", "", "ccc"}, out[3].number = 7;
  out[4].op = Op::kCheck, out[4].keys = {"x"};
  return out;
}

std::string_view payload_of(const std::string& frame) {
  return std::string_view(frame).substr(tcp_store::kFrameHeaderBytes);
}

TEST(TcpStoreProtocol, RequestsRoundTrip) {
  for (const tcp_store::Request& in : sample_requests()) {
    const std::string frame = tcp_store::encode_request(in);
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>(frame[i])) << (8 * i);
    EXPECT_EQ(length, frame.size() - 4);
    tcp_store::Request out;
    ASSERT_TRUE(tcp_store::decode_request(payload_of(frame), &out).ok()) << tcp_store::op_name(in.op);
    EXPECT_EQ(out.op, in.op);
    EXPECT_EQ(out.key, in.key);
    EXPECT_EQ(out.value, in.value);
    EXPECT_EQ(out.keys, in.keys);
    EXPECT_EQ(out.number, in.number);
  }
}

// Every proper prefix of a valid payload is cut short somewhere; one extra byte is left over.
TEST(TcpStoreProtocol, EveryTruncationAndTrailingByteIsRejected) {
  for (const tcp_store::Request& in : sample_requests()) {
    const std::string payload(payload_of(tcp_store::encode_request(in)));
    tcp_store::Request out;
    for (size_t n = 0; n < payload.size(); ++n) {
      const Status s = tcp_store::decode_request(std::string_view(payload).substr(0, n), &out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << tcp_store::op_name(in.op) << " cut at " << n;
    }
    const Status s = tcp_store::decode_request(payload + "!", &out);
    EXPECT_THAT(s.message(), HasSubstr("left over")) << tcp_store::op_name(in.op);
  }
}

TEST(TcpStoreProtocol, LimitsAreEnforced) {
  tcp_store::Request out;
  // Unknown op.
  EXPECT_THAT(tcp_store::decode_request(std::string("\xee", 1), &out).message(), HasSubstr("unknown op"));
  // A key over kMaxKeyBytes.
  tcp_store::Request big;
  big.op = tcp_store::Op::kGet;
  big.key.assign(tcp_store::kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(tcp_store::check_request_limits(big).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(tcp_store::decode_request(payload_of(tcp_store::encode_request(big)), &out).message(),
              HasSubstr("exceeds the limit"));
  // A key count of 4 billion in a tiny payload: refused before anything is allocated.
  const std::string lying("\x05\xff\xff\xff\xff", 5);
  EXPECT_THAT(tcp_store::decode_request(lying, &out).message(), HasSubstr("exceed the limit"));
  // A string length pointing past the end.
  const std::string past_end("\x01\x10\x00\x00\x00" "abc", 8);
  EXPECT_THAT(tcp_store::decode_request(past_end, &out).message(), HasSubstr("cut short"));
}

TEST(TcpStoreProtocol, ResponsesRoundTrip) {
  using tcp_store::Op;
  using tcp_store::Reply;
  tcp_store::Response in, out;
  in.value = "val";
  ASSERT_TRUE(tcp_store::decode_response(Op::kGet, payload_of(tcp_store::encode_response(Op::kGet, in)), &out).ok());
  EXPECT_EQ(out.value, "val");
  in = {};
  in.reply = Reply::kTimeout;
  in.missing = {"b", "c"};
  ASSERT_TRUE(tcp_store::decode_response(Op::kWait, payload_of(tcp_store::encode_response(Op::kWait, in)), &out).ok());
  EXPECT_EQ(out.reply, Reply::kTimeout);
  EXPECT_EQ(out.missing, in.missing);
  in = {};
  in.number = -42;
  ASSERT_TRUE(tcp_store::decode_response(Op::kAdd, payload_of(tcp_store::encode_response(Op::kAdd, in)), &out).ok());
  EXPECT_EQ(out.number, -42);
  in = {};
  in.present = true;
  ASSERT_TRUE(
      tcp_store::decode_response(Op::kCheck, payload_of(tcp_store::encode_response(Op::kCheck, in)), &out).ok());
  EXPECT_TRUE(out.present);
  EXPECT_FALSE(tcp_store::decode_response(Op::kCheck, std::string("\x07", 1), &out).ok());  // unknown reply code
}

// ---- TCP behaviour -------------------------------------------------------------------

// A raw socket, for feeding the server bytes no client would send.
int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool raw_send(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// True when the server closes the connection (EOF or reset) within `timeout`.
bool closed_by_server(int fd, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

std::string frame_header(uint32_t length) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return h;
}

void expect_server_still_serves(int port) {
  auto client = connect_client(port);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->set("after", "ok").ok());
  EXPECT_EQ(client->get("after", kLong).value(), "ok");
}

TEST(TcpStore, SixteenConcurrentClientsMeet) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 16;
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = TcpStoreClient::connect("127.0.0.1", server->port(), kLong);
      if (!client.ok()) {
        errors[i] = client.status().to_string();
        return;
      }
      Store& store = **client;
      std::vector<std::string> keys;
      for (int j = 0; j < kClients; ++j) keys.push_back("rank/" + std::to_string(j));
      Status s = store.set(keys[i], "value" + std::to_string(i));
      if (s.ok()) s = store.add("arrived", 1).status();
      if (s.ok()) s = store.wait(keys, kLong);
      for (int j = 0; s.ok() && j < kClients; ++j) {
        auto v = store.get(keys[j], kLong);
        if (!v.ok()) s = v.status();
        else if (*v != "value" + std::to_string(j)) s = Status(StatusCode::kInternal, "wrong value " + *v);
      }
      if (!s.ok()) errors[i] = s.to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(errors[i], "") << "client " << i;
  EXPECT_EQ(connect_client(server->port())->get("arrived", kLong).value(), std::to_string(kClients));
}

TEST(TcpStore, AWaitingClientDoesNotBlockOthers) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  auto waiter = connect_client(server->port());
  auto other = connect_client(server->port());
  ASSERT_TRUE(waiter && other);
  Status waited;
  std::thread t([&] { waited = waiter->wait({"go"}, kLong); });
  std::this_thread::sleep_for(milliseconds(100));
  const auto start = Clock::now();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(other->set("k" + std::to_string(i), "v").ok());
    ASSERT_EQ(other->get("k" + std::to_string(i), kLong).value(), "v");
  }
  EXPECT_LT(seconds_since(start), 2.0);
  ASSERT_TRUE(other->set("go", "1").ok());
  t.join();
  EXPECT_TRUE(waited.ok()) << waited.to_string();
}

TEST(TcpStore, ConnectBeforeServerStartSucceedsOnceItStarts) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    server = start_server(port);
  });
  const auto start = Clock::now();
  auto client = TcpStoreClient::connect("127.0.0.1", port, kLong);
  const double waited = seconds_since(start);
  starter.join();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  EXPECT_GE(waited, 0.25);
  ASSERT_TRUE((*client)->set("k", "v").ok());
  EXPECT_EQ((*client)->get("k", kLong).value(), "v");
}

TEST(TcpStore, ConnectWithoutServerFailsAfterTheTimeoutNamingTheAddress) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const auto start = Clock::now();
  auto client = TcpStoreClient::connect("127.0.0.1", port, milliseconds(500));
  const double waited = seconds_since(start);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().code() == StatusCode::kTimeout || client.status().code() == StatusCode::kIoError)
      << client.status().to_string();
  EXPECT_THAT(client.status().message(), HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 2.0);
}

TEST(TcpStore, StartOnABusyPortFails) {
  auto first = start_server();
  ASSERT_NE(first, nullptr);
  TcpStoreServerOptions options;
  options.port = first->port();
  auto second = TcpStoreServer::start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(":" + std::to_string(first->port())));
}

// Sanity for the raw-socket tests below: a well-formed raw request gets a reply.
TEST(TcpStore, RawWellFormedRequestIsAnswered) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  const int fd = raw_connect(server->port());
  ASSERT_GE(fd, 0);
  tcp_store::Request check;
  check.op = tcp_store::Op::kCheck;
  ASSERT_TRUE(raw_send(fd, tcp_store::encode_request(check)));
  std::string payload;
  ASSERT_TRUE(tcp_store::read_frame(fd, 1024, tcp_store::deadline_after(kLong), kLong, &payload).ok());
  tcp_store::Response response;
  ASSERT_TRUE(tcp_store::decode_response(tcp_store::Op::kCheck, payload, &response).ok());
  EXPECT_TRUE(response.present);
  ::close(fd);
}

TEST(TcpStore, BadInputClosesOnlyThatConnection) {
  auto server = start_server(0, 1 << 20);
  ASSERT_NE(server, nullptr);
  auto bystander = connect_client(server->port());
  ASSERT_NE(bystander, nullptr);
  ASSERT_TRUE(bystander->set("before", "1").ok());
  const std::string lying_key("\x01\xe8\x03\x00\x00" "abc", 8);  // set, key of 1000 bytes, 3 sent
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http probe", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},  // "GET " read as a length: ~540 MB
      {"huge length prefix", frame_header(0xfffffff0u) + "xx"},
      {"just over max_message_bytes", frame_header((1u << 20) + 1)},
      {"unknown op", frame_header(1) + "\xee"},
      {"empty payload", frame_header(0)},
      {"key length past the end", frame_header(static_cast<uint32_t>(lying_key.size())) + lying_key},
      {"four billion keys", frame_header(5) + std::string("\x04\xff\xff\xff\xff", 5)},
  };
  for (const auto& [name, bytes] : cases) {
    const int fd = raw_connect(server->port());
    ASSERT_GE(fd, 0) << name;
    ASSERT_TRUE(raw_send(fd, bytes)) << name;
    EXPECT_TRUE(closed_by_server(fd, milliseconds(3000))) << name << ": the server kept the connection open";
    ::close(fd);
  }
  EXPECT_EQ(bystander->get("before", kLong).value(), "1");
  expect_server_still_serves(server->port());
}

TEST(TcpStore, TruncatedFramesThenCloseLeaveTheServerServing) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  for (const std::string& bytes : {frame_header(100) + "0123456789", std::string("\x10\x00", 2)}) {
    const int fd = raw_connect(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(raw_send(fd, bytes));
    ::close(fd);
  }
  std::this_thread::sleep_for(milliseconds(50));
  expect_server_still_serves(server->port());
}

TEST(TcpStore, OversizedRequestFailsThatClientOnly) {
  auto server = start_server(0, 1 << 20);
  ASSERT_NE(server, nullptr);
  auto client = connect_client(server->port());
  ASSERT_NE(client, nullptr);
  const Status s = client->set("big", std::string(2 << 20, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.to_string();
  EXPECT_THAT(s.message(), HasSubstr("127.0.0.1:" + std::to_string(server->port())));
  EXPECT_THAT(s.message(), HasSubstr("set(\"big\")"));
  // The broken connection fails fast from now on instead of reading a stale stream.
  const Status again = client->set("small", "x");
  EXPECT_EQ(again.code(), StatusCode::kIoError);
  EXPECT_THAT(again.message(), HasSubstr("earlier error"));
  expect_server_still_serves(server->port());
}

TEST(TcpStore, OversizedKeyIsRefusedWithoutLosingTheConnection) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  auto client = connect_client(server->port());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->set(std::string(tcp_store::kMaxKeyBytes + 1, 'k'), "v").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client->wait({"a", std::string(tcp_store::kMaxKeyBytes + 1, 'k')}, kLong).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(client->set("fine", "v").ok());
}

TEST(TcpStore, StopWhileAClientWaitsFailsTheWaitPromptly) {
  auto server = start_server();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  auto client = connect_client(port);
  ASSERT_NE(client, nullptr);
  Status waited;
  Clock::time_point returned;
  std::thread t([&] {
    waited = client->wait({"never"}, milliseconds(30000));
    returned = Clock::now();
  });
  std::this_thread::sleep_for(milliseconds(200));
  const auto stop_start = Clock::now();
  server->stop();
  EXPECT_LT(seconds_since(stop_start), 2.0) << "stop() hung";
  t.join();
  EXPECT_LT(std::chrono::duration<double>(returned - stop_start).count(), 2.0);
  EXPECT_EQ(waited.code(), StatusCode::kIoError) << waited.to_string();
  EXPECT_THAT(waited.message(), HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(waited.message(), HasSubstr("wait"));
  server->stop();  // idempotent
  // A new request fails at once rather than hanging on a dead server.
  const auto start = Clock::now();
  EXPECT_FALSE(client->set("k", "v").ok());
  EXPECT_LT(seconds_since(start), 2.0);
}

}  // namespace
}  // namespace zdp

namespace zdp {
namespace {

// The job secret: a client must present it before anything else, or it is refused.
TEST(TcpStoreSecret, OnlyClientsWithTheSecretAreServed) {
  TcpStoreServerOptions options;
  options.secret = "s3cret-0123456789";
  auto server = TcpStoreServer::start(options);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const int port = (*server)->port();

  auto good = TcpStoreClient::connect("127.0.0.1", port, std::chrono::seconds(5), "s3cret-0123456789");
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  ASSERT_TRUE((*good)->set("k", "v").ok());

  auto wrong = TcpStoreClient::connect("127.0.0.1", port, std::chrono::seconds(5), "s3cret-0123456780");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("wrong job secret"), std::string::npos) << wrong.status().message();

  auto none = TcpStoreClient::connect("127.0.0.1", port, std::chrono::seconds(5));
  ASSERT_TRUE(none.ok());  // the TCP connection itself is accepted...
  auto value = (*none)->get("k", std::chrono::seconds(1));
  ASSERT_FALSE(value.ok());  // ...but no request is served without the secret
  EXPECT_NE(value.status().message().find("ZDP_JOB_SECRET"), std::string::npos) << value.status().message();

  // The refused clients did not disturb the good one.
  auto got = (*good)->get("k", std::chrono::seconds(1));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "v");
}

TEST(TcpStoreSecret, AServerWithoutSecretAcceptsClientsThatSendOne) {
  auto server = TcpStoreServer::start(TcpStoreServerOptions{});
  ASSERT_TRUE(server.ok());
  auto client = TcpStoreClient::connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "anything");
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  EXPECT_TRUE((*client)->set("a", "1").ok());
}

}  // namespace
}  // namespace zdp
