// TcpStoreServer: accepts rank connections and answers store requests, one thread per
// connection, over an InMemoryStore that holds the data.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "runtime/src/store/tcp_store_protocol.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using tcp_store::Clock;
using tcp_store::Op;
using tcp_store::Reply;
using tcp_store::Request;
using tcp_store::Response;

// Thread per connection: a job has one connection per rank (plus the launcher), and a
// blocking wait then holds only its own thread. This bounds the threads; connections
// beyond it are closed at once with a warning.
constexpr size_t kMaxConnections = 4096;
// A waiting request wakes this often to notice stop() and clients that hung up.
constexpr std::chrono::milliseconds kWaitSlice{100};
// Once a frame has begun, the rest must arrive within this; a stalled sender holds only
// its own connection (and thread) until then.
constexpr std::chrono::milliseconds kFrameBodyTimeout{30000};
// A client that stops reading its replies is dropped after this.
constexpr std::chrono::milliseconds kSendTimeout{30000};

std::string errno_text() { return std::strerror(errno); }

// "127.0.0.1:41234" or "[::1]:41234"
std::string peer_name(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// True once the client has closed its end (it gave up waiting, or died).
bool peer_hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(int listen_fd, int wake_read_fd, int wake_write_fd, int port, uint64_t max_message_bytes,
                     std::string secret)
      : port_(port),
        max_message_bytes_(max_message_bytes),
        secret_(std::move(secret)),
        listen_fd_(listen_fd),
        wake_read_fd_(wake_read_fd),
        wake_write_fd_(wake_write_fd) {}
  ~TcpStoreServerImpl() override { stop(); }

  int port() const override { return port_; }
  void stop() override;
  void start_accepting() { accept_thread_ = std::thread([this] { accept_loop(); }); }

 private:
  struct Connection {
    int fd = -1;  // closed (and set to -1) by its own thread, under conns_mu_
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
    bool authenticated = false;       // presented the job secret (or none is required)
    bool close_after_reply = false;   // refused: answer, then hang up
  };
  enum class WaitResult { kReady, kTimeout, kAbandoned };

  void accept_loop();
  void add_connection(int fd, std::string peer);
  void reap_finished();
  void serve(Connection* conn);
  // False when the request was abandoned (server stopping, client gone): close quietly.
  bool handle(Connection& conn, const Request& request, Response* response);
  bool authenticate(Connection& conn, const Request& request, Response* response);
  WaitResult wait_for_keys(const Connection& conn, const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout, std::vector<std::string>* missing);

  const int port_;
  const uint64_t max_message_bytes_;
  const std::string secret_;
  const int listen_fd_;
  const int wake_read_fd_;
  const int wake_write_fd_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;  // held for the whole of stop(): a second caller waits for the first
  bool stopped_ = false;
  std::thread accept_thread_;
  std::mutex conns_mu_;
  std::list<std::unique_ptr<Connection>> conns_;
  InMemoryStore data_;
};

void TcpStoreServerImpl::stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  const char byte = 1;
  if (::write(wake_write_fd_, &byte, 1) < 0) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": cannot wake the accept thread: " << errno_text();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  std::list<std::unique_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    // shutdown (not close) wakes a thread blocked on the fd without freeing the number.
    for (auto& conn : conns_) {
      if (conn->fd >= 0) ::shutdown(conn->fd, SHUT_RDWR);
    }
    conns.swap(conns_);
  }
  for (auto& conn : conns) conn->thread.join();
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
}

void TcpStoreServerImpl::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ZDP_LOG(kError) << "store server :" << port_ << ": poll failed, no longer accepting: " << errno_text();
      return;
    }
    if (fds[1].revents != 0) return;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
      ZDP_LOG(kWarn) << "store server :" << port_ << ": accept failed: " << errno_text();
      // Out of descriptors: back off instead of spinning on a listen socket that stays ready.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    reap_finished();
    add_connection(fd, peer_name(addr));
  }
}

void TcpStoreServerImpl::add_connection(int fd, std::string peer) {
  std::lock_guard<std::mutex> lock(conns_mu_);
  if (conns_.size() >= kMaxConnections) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": refusing " << peer << ": already " << conns_.size()
                   << " connections (the limit)";
    ::close(fd);
    return;
  }
  auto conn = std::make_unique<Connection>();
  conn->fd = fd;
  conn->peer = std::move(peer);
  Connection* raw = conn.get();
  try {
    conn->thread = std::thread([this, raw] { serve(raw); });
  } catch (const std::system_error& e) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": cannot start a thread for " << raw->peer << ": " << e.what();
    ::close(fd);
    return;
  }
  conns_.push_back(std::move(conn));
}

void TcpStoreServerImpl::reap_finished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      auto next = std::next(it);
      if ((*it)->done) finished.splice(finished.end(), conns_, it);
      it = next;
    }
  }
  for (auto& conn : finished) conn->thread.join();
}

void TcpStoreServerImpl::serve(Connection* conn) {
  std::string payload;
  while (!stopping_) {
    Status s = tcp_store::read_frame(conn->fd, max_message_bytes_, tcp_store::kNoDeadline, kFrameBodyTimeout, &payload);
    if (!s.ok()) {
      if (s.code() != StatusCode::kPeerFailure && !stopping_) {
        ZDP_LOG(kWarn) << "store server :" << port_ << ": closing the connection from " << conn->peer << ": "
                       << s.message();
      }
      break;
    }
    Request request;
    s = tcp_store::decode_request(payload, &request);
    if (!s.ok()) {
      ZDP_LOG(kWarn) << "store server :" << port_ << ": closing the connection from " << conn->peer << ": "
                     << s.message();
      break;
    }
    Response response;
    if (!handle(*conn, request, &response)) break;
    s = tcp_store::send_all(conn->fd, tcp_store::encode_response(request.op, response),
                            tcp_store::deadline_after(kSendTimeout));
    if (!s.ok()) {
      if (!stopping_) {
        ZDP_LOG(kWarn) << "store server :" << port_ << ": cannot reply to " << conn->peer << ": " << s.message();
      }
      break;
    }
    if (conn->close_after_reply) break;
  }
  std::lock_guard<std::mutex> lock(conns_mu_);
  ::close(conn->fd);
  conn->fd = -1;
  conn->done = true;
}

// Constant time over the bytes: the time to refuse does not tell how much of a guess was
// right (only whether its length was).
bool same_secret(const std::string& presented, const std::string& expected) {
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}

bool TcpStoreServerImpl::authenticate(Connection& conn, const Request& request, Response* response) {
  if (request.op != Op::kAuth) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": refused " << conn.peer
                   << ": a " << op_name(request.op) << " request without the job secret";
    return false;
  }
  if (!same_secret(request.value, secret_)) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": refused " << conn.peer << ": wrong job secret";
    response->reply = Reply::kInvalidArgument;
    response->message = "wrong job secret";
    conn.close_after_reply = true;
    return true;
  }
  conn.authenticated = true;
  return true;
}

bool TcpStoreServerImpl::handle(Connection& conn, const Request& request, Response* response) {
  if (!secret_.empty() && !conn.authenticated) return authenticate(conn, request, response);
  const std::chrono::milliseconds timeout(request.number);
  switch (request.op) {
    case Op::kAuth:
      return true;  // no secret required, or presented again: nothing to check
    case Op::kSet:
      (void)data_.set(request.key, request.value);  // in memory: cannot fail
      return true;
    case Op::kGet: {
      const WaitResult r = wait_for_keys(conn, {request.key}, timeout, &response->missing);
      if (r == WaitResult::kAbandoned) return false;
      if (r == WaitResult::kTimeout) {
        response->reply = Reply::kTimeout;
        return true;
      }
      StatusOr<std::string> value = data_.get(request.key, std::chrono::milliseconds(0));  // keys are never erased
      if (value.ok()) response->value = std::move(*value);
      return true;
    }
    case Op::kAdd: {
      StatusOr<int64_t> value = data_.add(request.key, request.number);
      if (value.ok()) {
        response->number = *value;
      } else {
        response->reply = Reply::kInvalidArgument;
        response->message = value.status().message();
      }
      return true;
    }
    case Op::kWait: {
      const WaitResult r = wait_for_keys(conn, request.keys, timeout, &response->missing);
      if (r == WaitResult::kAbandoned) return false;
      if (r == WaitResult::kTimeout) response->reply = Reply::kTimeout;
      return true;
    }
    case Op::kCheck: {
      StatusOr<bool> present = data_.check(request.keys);
      response->present = present.ok() && *present;
      return true;
    }
  }
  return false;
}

// Waits in slices so that stop() and a vanished client end the wait within a slice.
TcpStoreServerImpl::WaitResult TcpStoreServerImpl::wait_for_keys(const Connection& conn,
                                                                  const std::vector<std::string>& keys,
                                                                  std::chrono::milliseconds timeout,
                                                                  std::vector<std::string>* missing) {
  const Clock::time_point deadline = tcp_store::deadline_after(timeout);
  while (true) {
    if (stopping_) return WaitResult::kAbandoned;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const auto slice = std::max(std::chrono::milliseconds(0), std::min(kWaitSlice, left));
    if (data_.wait(keys, slice).ok()) return WaitResult::kReady;
    if (Clock::now() >= deadline) break;
    if (peer_hung_up(conn.fd)) return WaitResult::kAbandoned;
  }
  for (const std::string& key : keys) {
    StatusOr<bool> present = data_.check({key});
    if (present.ok() && !*present) missing->push_back(key);
  }
  // Everything may have arrived since the last slice: then the wait succeeded after all.
  return missing->empty() ? WaitResult::kReady : WaitResult::kTimeout;
}

}  // namespace

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  const std::string where = options.bind_host + ":" + std::to_string(options.port);
  if (options.port < 0 || options.port > 65535) {
    return Status(StatusCode::kInvalidArgument,
                  "store server: port " + std::to_string(options.port) + " is not in 0..65535");
  }
  if (options.max_message_bytes < 64) {
    return Status(StatusCode::kInvalidArgument, "store server: max_message_bytes " +
                                                    std::to_string(options.max_message_bytes) + " is below 64");
  }
  // The frame length is a u32.
  const uint64_t max_message_bytes = std::min<uint64_t>(static_cast<uint64_t>(options.max_message_bytes), UINT32_MAX);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addrs = nullptr;
  const std::string port_text = std::to_string(options.port);
  const int rc = ::getaddrinfo(options.bind_host.empty() ? nullptr : options.bind_host.c_str(), port_text.c_str(),
                               &hints, &addrs);
  if (rc != 0) {
    return Status(StatusCode::kInvalidArgument, "store server: cannot resolve " + where + ": " + ::gai_strerror(rc));
  }
  int listen_fd = -1;
  std::string last_error = "no address";
  for (addrinfo* a = addrs; a != nullptr && listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = "socket: " + errno_text();
      continue;
    }
    // SO_REUSEADDR: a restarted launcher can rebind its port while old connections linger in TIME_WAIT.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last_error = "bind: " + errno_text();
      ::close(fd);
      continue;
    }
    if (::listen(fd, SOMAXCONN) != 0) {
      last_error = "listen: " + errno_text();
      ::close(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(addrs);
  if (listen_fd < 0) return Status(StatusCode::kIoError, "store server: cannot listen on " + where + ": " + last_error);

  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    const std::string error = errno_text();
    ::close(listen_fd);
    return Status(StatusCode::kIoError, "store server: getsockname on " + where + ": " + error);
  }
  const int port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // A pipe wakes the accept thread's poll() at stop(): closing a listening socket under a
  // blocked poll/accept is not reliable across kernels.
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    const std::string error = errno_text();
    ::close(listen_fd);
    return Status(StatusCode::kIoError, "store server: pipe: " + error);
  }
  auto server =
      std::make_unique<TcpStoreServerImpl>(listen_fd, wake[0], wake[1], port, max_message_bytes, options.secret);
  try {
    server->start_accepting();
  } catch (const std::system_error& e) {
    return Status(StatusCode::kIoError, "store server: cannot start the accept thread: " + std::string(e.what()));
  }
  ZDP_LOG(kDebug) << "store server listening on " << options.bind_host << ":" << port;
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace zdp
