// The TCP store server and client: many concurrent clients, a waiting client that blocks
// no one, late and missing servers, busy ports, bad input on raw sockets that closes only
// that connection, oversized requests, stop() during a wait, and the job secret.
#include "zdp/tcp_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "runtime/src/store/tcp_store_protocol.h"
#include "testing/tcp_store_helpers.h"
#include "zdp/store.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::connect_client;
using testing::free_port;
using testing::kLong;
using testing::start_server;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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

// A store host whose name does not resolve yet (a Kubernetes pod that is not running:
// its DNS record comes with it) is waited for until the timeout, as a store that is not
// listening yet is; it failed at once. `.invalid` never resolves (RFC 2606).
TEST(TcpStore, AHostThatDoesNotResolveYetIsWaitedForUntilTheTimeout) {
  const auto start = Clock::now();
  auto client = TcpStoreClient::connect("zdp-store-not-up-yet.invalid", 29500, milliseconds(1200));
  const double waited = seconds_since(start);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kTimeout) << client.status().to_string();
  EXPECT_THAT(client.status().message(), HasSubstr("zdp-store-not-up-yet.invalid:29500"));
  EXPECT_THAT(client.status().message(), HasSubstr("cannot resolve host"));
  EXPECT_GE(waited, 1.2);
}

// A store that accepts and never answers (a stopped or hung host: the kernel completes
// the TCP handshake from the listen backlog): a loopback socket listened on, never
// accepted. Its port in *port; -1 on failure.
int mute_listener(int* port) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listener, 16) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (listener >= 0) ::close(listener);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return listener;
}

// The secret's answer from a mute store was awaited a fixed
// 60 s whatever the connect's timeout, and Ctrl-C (`stop`) went unseen meanwhile.
TEST(TcpStore, AMuteStoreHoldsAConnectNoLongerThanItsTimeoutOrItsStop) {
  int port = 0;
  const int listener = mute_listener(&port);
  ASSERT_GE(listener, 0);
  const std::string secret = "0123456789abcdef0123";
  auto start = Clock::now();
  auto timed = TcpStoreClient::connect("127.0.0.1", port, milliseconds(1500), secret);
  ASSERT_FALSE(timed.ok());
  EXPECT_THAT(timed.status().message(), HasSubstr("auth: no reply within"));
  EXPECT_LT(seconds_since(start), 5.0) << timed.status().to_string();
  start = Clock::now();
  auto stopped = TcpStoreClient::connect("127.0.0.1", port, milliseconds(30000), secret, "",
                                         [&] { return seconds_since(start) > 0.3; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kAborted) << stopped.status().to_string();
  EXPECT_LT(seconds_since(start), 2.0) << stopped.status().to_string();
  ::close(listener);
}

// A client's `stop` also bounds its later calls: a launcher stopped by a signal waited up
// to a minute for each reply of a store that stopped answering (Ctrl-C unseen meanwhile);
// now 1 s. A healthy store still answers a stopped client's calls (its last words).
TEST(TcpStore, AStoppedClientGivesUpOnAMuteStoreAndStillTalksToAHealthyOne) {
  int port = 0;
  const int listener = mute_listener(&port);
  ASSERT_GE(listener, 0);
  std::atomic<bool> stopped{false};
  auto mute = TcpStoreClient::connect("127.0.0.1", port, milliseconds(5000), "", "",
                                      [&] { return stopped.load(); });
  ASSERT_TRUE(mute.ok()) << mute.status().to_string();  // no secret: nothing to answer yet
  stopped = true;
  auto start = Clock::now();
  const Status set = (*mute)->set("k", "v");
  EXPECT_EQ(set.code(), StatusCode::kAborted) << set.to_string();
  EXPECT_LT(seconds_since(start), 3.0) << set.to_string();
  start = Clock::now();
  EXPECT_EQ((*mute)->get("k", milliseconds(30000)).status().code(), StatusCode::kIoError);  // the connection is done
  EXPECT_LT(seconds_since(start), 1.0);
  ::close(listener);

  auto server = start_server();
  ASSERT_NE(server, nullptr);
  auto healthy = TcpStoreClient::connect("127.0.0.1", server->port(), milliseconds(5000), "", "", [] { return true; });
  ASSERT_TRUE(healthy.ok()) << healthy.status().to_string();
  EXPECT_TRUE((*healthy)->set("job/failed", "node 1 was stopped").ok());
  const StatusOr<std::string> got = (*healthy)->get("job/failed", milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, "node 1 was stopped");
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
