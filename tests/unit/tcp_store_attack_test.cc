// The TCP store server under attack, in this process (so its threads and memory are this
// process's): a thousand idle connections, length headers announcing 64 MiB, a flood of
// wrong secrets and a client that pipelines requests and reads nothing, while clients
// with the secret keep being served; and a thousand ranks connecting at once. Each test measures
// what the attack used to cost (a thread per connection, 64 MiB per header, a log line
// per refusal) and checks it stays bounded.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/src/store/tcp_store_protocol.h"
#include "testing/temp_dir.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "attack-test-secret-0123456789abcdef";

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

// "VmRSS" or "VmHWM" of this process, in KiB.
long status_kib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

long threads() { return status_kib("Threads"); }

std::unique_ptr<TcpStoreServer> start(milliseconds auth_timeout = milliseconds(5000)) {
  TcpStoreServerOptions o;
  o.secret = kSecret;
  o.auth_timeout = auth_timeout;
  auto server = TcpStoreServer::start(o);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(*server) : nullptr;
}

// A client with the secret sets and reads back a key within `limit`.
void expect_served(int port, const std::string& key, milliseconds limit = milliseconds(5000)) {
  const auto t0 = Clock::now();
  auto client = TcpStoreClient::connect("127.0.0.1", port, limit, kSecret);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->set(key, "v").ok());
  auto got = (*client)->get(key, limit);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(Clock::now() - t0, limit);
}

// Enough descriptors for a thousand connections at both ends.
void raise_fd_limit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
}

TEST(TcpStoreAttack, AThousandIdleConnectionsCostNoThreadsAndAreClosedAtTheAuthDeadline) {
  raise_fd_limit();
  auto server = start(milliseconds(1500));
  ASSERT_NE(server, nullptr);
  const long before = threads();
  std::vector<int> fds;
  for (int i = 0; i < 1000; ++i) {
    const int fd = raw_connect(server->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_LE(threads(), before) << "the server started threads for idle connections";
  expect_served(server->port(), "during");  // the ranks still get in
  // All of them are closed by the server: the oldest when newer ones came (at most 64
  // may wait for the secret), the rest at the auth deadline.
  const auto deadline = Clock::now() + milliseconds(5000);
  size_t closed = 0;
  for (const int fd : fds) {
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
    char byte;
    if (::poll(&p, 1, std::max(left, 0)) > 0 && ::recv(fd, &byte, 1, 0) <= 0) ++closed;
    ::close(fd);
  }
  EXPECT_EQ(closed, fds.size());
  expect_served(server->port(), "after");
}

TEST(TcpStoreAttack, HeadersAnnouncing64MiBAllocateNothing) {
  auto server = start();
  ASSERT_NE(server, nullptr);
  const long rss_before = status_kib("VmRSS");
  const std::string header("\x00\x00\x00\x04", 4);  // 64 MiB, little-endian
  int closed = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<int> fds;
    for (int i = 0; i < 16; ++i) {
      const int fd = raw_connect(server->port());
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::send(fd, header.data(), header.size(), MSG_NOSIGNAL), 4);
      fds.push_back(fd);
    }
    for (const int fd : fds) {
      pollfd p{fd, POLLIN, 0};
      char byte;
      if (::poll(&p, 1, 3000) > 0 && ::recv(fd, &byte, 1, 0) <= 0) ++closed;
      ::close(fd);
    }
  }
  const long grown_mib = (status_kib("VmRSS") - rss_before) / 1024;
  std::printf("RSS grew by %ld MiB for 64 headers announcing 64 MiB each\n", grown_mib);
  EXPECT_EQ(closed, 64) << "a header over the pre-auth limit must close the connection at once";
  EXPECT_LT(grown_mib, 16);  // it used to be 64 MiB per open connection
  expect_served(server->port(), "k");
}

TEST(TcpStoreAttack, AFloodOfWrongSecretsIsLoggedInAFewLinesWhileRanksAreServed) {
  testing::TempDir dir;
  const std::string log_path = dir.path() + "/stderr.txt";
  auto server = start();
  ASSERT_NE(server, nullptr);
  // Catch the server's log lines (stderr) in a file for the duration of the flood.
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* log = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  ::dup2(::fileno(log), 2);
  std::atomic<bool> stop{false};
  std::atomic<int> guesses{0};
  std::thread flood([&] {
    while (!stop) {
      auto c = TcpStoreClient::connect("127.0.0.1", server->port(), milliseconds(1000),
                                       "guess-" + std::to_string(guesses.load()));
      if (!c.ok() && c.status().code() == StatusCode::kInvalidArgument) ++guesses;
    }
  });
  for (int i = 0; i < 20; ++i) expect_served(server->port(), "rank" + std::to_string(i));
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  flood.join();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(log);
  std::ifstream in(log_path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.find("refused") != std::string::npos ? 1 : 0;
  std::printf("%d wrong secrets refused, %d log lines\n", guesses.load(), lines);
  EXPECT_GT(guesses.load(), 20);
  EXPECT_LE(lines, 2) << "one line and one summary per 10 s at most";
}

// One frame's payload from a non-blocking `fd`, or an error.
StatusOr<tcp_store::Response> read_response(int fd, tcp_store::Op op) {
  std::string payload;
  ZDP_RETURN_IF_ERROR(tcp_store::read_frame(fd, 128ull << 20, tcp_store::deadline_after(milliseconds(10000)),
                                            milliseconds(10000), &payload));
  tcp_store::Response response;
  ZDP_RETURN_IF_ERROR(tcp_store::decode_response(op, payload, &response));
  return response;
}

void send_request(int fd, const tcp_store::Request& r) {
  ASSERT_TRUE(tcp_store::send_all(fd, tcp_store::encode_request(r), tcp_store::deadline_after(milliseconds(10000))).ok());
}

// A thousand ranks that connect and send the secret at once all get in. The server
// accepted them in bursts and read them later, so more than max_unauthenticated (64)
// accepted in one burst evicted each other with their secrets unread (half of them).
TEST(TcpStoreAttack, AThousandRanksConnectingAtOnceAreAllLetIn) {
  raise_fd_limit();
  auto server = start();
  ASSERT_NE(server, nullptr);
  tcp_store::Request auth;
  auth.op = tcp_store::Op::kAuth;
  auth.value = kSecret;
  const std::string frame = tcp_store::encode_request(auth);
  std::vector<int> fds;
  for (int i = 0; i < 1000; ++i) {
    const int fd = raw_connect(server->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
    fds.push_back(fd);
  }
  int let_in = 0;
  for (const int fd : fds) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    StatusOr<tcp_store::Response> r = read_response(fd, tcp_store::Op::kAuth);
    if (r.ok() && r->reply == tcp_store::Reply::kOk) ++let_in;
    ::close(fd);
  }
  EXPECT_EQ(let_in, 1000) << "ranks with the secret were evicted as idle connections";
}

// A client that pipelines 3000 gets of a small value, then 100 of a 4 MiB one, and reads
// no reply: the server holds at most ServerLimits::max_unsent_reply_bytes (4 MiB) and one
// reply of them, and answers the rest, in order, as the client reads (it held every
// reply: 400 MiB here).
TEST(TcpStoreAttack, AClientThatReadsNoReplyHoldsAFewMiBOfThem) {
  auto server = start();
  ASSERT_NE(server, nullptr);
  const int fd = raw_connect(server->port());
  ASSERT_GE(fd, 0);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  tcp_store::Request r;
  r.op = tcp_store::Op::kAuth;
  r.value = kSecret;
  send_request(fd, r);
  ASSERT_TRUE(read_response(fd, tcp_store::Op::kAuth).ok());
  const std::string value(4 << 20, 'v');
  r.op = tcp_store::Op::kSet;
  r.key = "big";
  r.value = value;
  send_request(fd, r);
  ASSERT_TRUE(read_response(fd, tcp_store::Op::kSet).ok());
  const long rss_before = status_kib("VmRSS");
  r.op = tcp_store::Op::kSet;
  r.key = "small";
  r.value = "s";
  send_request(fd, r);
  ASSERT_TRUE(read_response(fd, tcp_store::Op::kSet).ok());
  r.op = tcp_store::Op::kGet;
  r.value.clear();
  r.number = 10000;
  // Small gets first: each one's send used to reset the count and release a large reply.
  std::string gets;
  r.key = "small";
  for (int i = 0; i < 3000; ++i) gets += tcp_store::encode_request(r);
  r.key = "big";
  for (int i = 0; i < 100; ++i) gets += tcp_store::encode_request(r);
  ASSERT_TRUE(tcp_store::send_all(fd, gets, tcp_store::deadline_after(milliseconds(10000))).ok());
  std::this_thread::sleep_for(milliseconds(1000));
  const long grown_mib = (status_kib("VmRSS") - rss_before) / 1024;
  std::printf("RSS grew by %ld MiB for 3000 small and 100 unread replies of 4 MiB\n", grown_mib);
  EXPECT_LT(grown_mib, 48);
  for (int i = 0; i < 3100; ++i) {
    StatusOr<tcp_store::Response> got = read_response(fd, tcp_store::Op::kGet);
    ASSERT_TRUE(got.ok()) << "reply " << i << ": " << got.status().to_string();
    ASSERT_EQ(got->value.size(), i < 3000 ? 1 : value.size()) << "reply " << i;
  }
  ::close(fd);
  expect_served(server->port(), "after");
}

// TcpStoreServerOptions::max_connections reaches the server (it was a fixed 4096, which a
// job of ~2000 ranks, two connections each, outgrew): one more is closed at once.
TEST(TcpStoreAttack, ConnectionsPastMaxConnectionsAreClosed) {
  TcpStoreServerOptions o;
  o.max_connections = 3;
  auto server = TcpStoreServer::start(o);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) fds.push_back(raw_connect((*server)->port()));
  std::vector<bool> closed;
  for (const int fd : fds) {
    ASSERT_GE(fd, 0);
    pollfd p{fd, POLLIN, 0};
    char byte;
    closed.push_back(::poll(&p, 1, 1000) > 0 && ::recv(fd, &byte, 1, 0) <= 0);
    ::close(fd);
  }
  EXPECT_EQ(closed, (std::vector<bool>{false, false, false, true}));
  o.max_connections = 0;
  EXPECT_FALSE(TcpStoreServer::start(o).ok());
}

}  // namespace
}  // namespace zdp
