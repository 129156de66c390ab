// TcpStoreServer: one thread runs an epoll loop over the listening socket and every
// connection, moving bytes between the sockets and a ServerCore (tcp_store_core.h), which
// holds the data, the authentication and the waits. No thread per connection: a
// thousand idle connections cost a thousand small records, not a thousand threads.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/internal/host_port.h"
#include "runtime/src/store/listen_socket.h"
#include "runtime/src/store/tcp_store_core.h"
#include "runtime/src/store/tcp_store_protocol.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using tcp_store::ConnAction;
using tcp_store::ServerCore;
using Clock = std::chrono::steady_clock;
using Id = ServerCore::Id;

// epoll user data of the two non-connection fds; connection ids start above them.
constexpr Id kListenId = 0;
constexpr Id kWakeId = 1;
// A client that stops reading its replies is dropped after this.
constexpr std::chrono::milliseconds kSendTimeout{30000};
// Out of file descriptors: stop accepting for this long instead of spinning.
constexpr std::chrono::milliseconds kAcceptPause{100};
// Per readiness event: accept at most this many connections, read at most this many
// bytes of one connection, so one busy peer cannot starve the others.
constexpr int kAcceptBurst = 64;
constexpr size_t kReadChunk = 64 << 10;
constexpr int kReadChunksPerEvent = 16;

std::string errno_text() { return std::strerror(errno); }

// "127.0.0.1:41234" or "[::1]:41234"
std::string peer_name(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return host_port(host, port);
}

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(int listen_fd, int epoll_fd, int wake_read_fd, int wake_write_fd, int port,
                     const std::string& secret, tcp_store::ServerLimits limits)
      : port_(port),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_read_fd_(wake_read_fd),
        wake_write_fd_(wake_write_fd),
        core_("store server :" + std::to_string(port), secret, limits) {}
  ~TcpStoreServerImpl() override { stop(); }

  int port() const override { return port_; }
  void stop() override;
  void start_loop() { loop_thread_ = std::thread([this] { loop(); }); }

 private:
  struct Socket {
    int fd = -1;
    std::string out;  // bytes queued for the peer, from out_pos on
    size_t out_pos = 0;
    bool closing = false;  // close once `out` is sent
    Clock::time_point send_deadline = Clock::time_point::max();
    uint32_t events = 0;  // what epoll watches now
  };

  void loop();
  int wait_ms() const;
  void accept_some(Clock::time_point now);
  void on_socket(Id id, uint32_t events, Clock::time_point now);
  void apply(std::vector<std::pair<Id, ConnAction>> actions);
  void apply_once(std::vector<std::pair<Id, ConnAction>> actions);
  // Sends what is queued; closes the socket when it is done closing or the send failed.
  void flush(Id id);
  // Sets the epoll interest from the socket's state.
  void watch(Id id);
  void close_socket(Id id);
  void expire_sends(Clock::time_point now);

  const int port_;
  const int listen_fd_;
  const int epoll_fd_;
  const int wake_read_fd_;
  const int wake_write_fd_;
  std::mutex stop_mu_;  // held for the whole of stop(): a second caller waits for the first
  bool stopped_ = false;
  std::thread loop_thread_;
  // Owned by the loop thread (and by stop() once it has joined it).
  ServerCore core_;
  std::map<Id, Socket> sockets_;
  Id next_id_ = 2;
  Clock::time_point accept_paused_until_ = Clock::time_point::min();
};

void TcpStoreServerImpl::stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  const char byte = 1;
  if (::write(wake_write_fd_, &byte, 1) < 0) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": cannot wake the server thread: " << errno_text();
  }
  if (loop_thread_.joinable()) loop_thread_.join();
  for (auto& [id, socket] : sockets_) ::close(socket.fd);  // clients see the end of the stream
  sockets_.clear();
  ::close(listen_fd_);
  ::close(epoll_fd_);
  ::close(wake_read_fd_);
  ::close(wake_write_fd_);
}

int TcpStoreServerImpl::wait_ms() const {
  Clock::time_point next = core_.next_deadline();
  for (const auto& [id, socket] : sockets_) next = std::min(next, socket.send_deadline);
  if (accept_paused_until_ != Clock::time_point::min()) next = std::min(next, accept_paused_until_);
  if (next == Clock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

void TcpStoreServerImpl::loop() {
  epoll_event events[256];
  while (true) {
    const int n = ::epoll_wait(epoll_fd_, events, 256, wait_ms());
    if (n < 0 && errno != EINTR) {
      ZDP_LOG(kError) << "store server :" << port_ << ": epoll_wait failed, no longer serving: " << errno_text();
      return;
    }
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const Id id = events[i].data.u64;
      if (id == kWakeId) return;
      if (id == kListenId) {
        accept_some(now);
      } else {
        on_socket(id, events[i].events, now);
      }
    }
    core_.tick(now);
    apply(core_.take_actions());
    expire_sends(now);
    if (accept_paused_until_ != Clock::time_point::min() && now >= accept_paused_until_) {
      accept_paused_until_ = Clock::time_point::min();
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
  }
}

void TcpStoreServerImpl::accept_some(Clock::time_point now) {
  for (int i = 0; i < kAcceptBurst; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (accept_paused_until_ == Clock::time_point::min()) {
          ZDP_LOG(kWarn) << "store server :" << port_ << ": out of file descriptors (" << errno_text()
                         << "); pausing new connections for " << kAcceptPause.count() << " ms";
        }
        accept_paused_until_ = now + kAcceptPause;
        epoll_event ev{};
        ev.data.u64 = kListenId;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        ZDP_LOG(kWarn) << "store server :" << port_ << ": accept failed: " << errno_text();
      }
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const Id id = next_id_++;
    Socket& socket = sockets_[id];
    socket.fd = fd;
    socket.events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = socket.events;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ZDP_LOG(kWarn) << "store server :" << port_ << ": cannot watch a new connection: " << errno_text();
      ::close(fd);
      sockets_.erase(id);
      continue;
    }
    core_.open(id, peer_name(addr), now);
    apply(core_.take_actions());
    // A rank sends the secret as it connects: read what came, so that it authenticates
    // now. Left for a later round, many ranks connecting at once (more than
    // max_unauthenticated in one burst) evicted each other with their secrets unread.
    on_socket(id, EPOLLIN, now);
  }
}

void TcpStoreServerImpl::on_socket(Id id, uint32_t events, Clock::time_point now) {
  if (sockets_.find(id) == sockets_.end()) return;  // closed earlier in this round
  if (events & EPOLLOUT) flush(id);
  const auto it = sockets_.find(id);
  if (it == sockets_.end()) return;
  const int fd = it->second.fd;
  bool hung_up = (events & (EPOLLHUP | EPOLLERR)) != 0;
  if ((events & EPOLLIN) && core_.reading(id) && !it->second.closing) {
    char buf[kReadChunk];
    for (int chunk = 0; chunk < kReadChunksPerEvent && core_.reading(id); ++chunk) {
      const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
      if (got > 0) {
        core_.receive(id, std::string_view(buf, static_cast<size_t>(got)), now);
        apply(core_.take_actions());
        if (sockets_.find(id) == sockets_.end()) return;
        continue;
      }
      if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) hung_up = true;
      break;
    }
  } else if (events & EPOLLRDHUP) {
    hung_up = true;  // gone while its request waits: nobody to answer
  }
  if (hung_up) {
    core_.closed(id);
    close_socket(id);
    return;
  }
  watch(id);
}

void TcpStoreServerImpl::apply(std::vector<std::pair<Id, ConnAction>> actions) {
  // A flush that sends replies lets the core handle requests it held (ServerCore::sent),
  // whose replies are new actions: until there are none.
  for (; !actions.empty(); actions = core_.take_actions()) apply_once(std::move(actions));
}

void TcpStoreServerImpl::apply_once(std::vector<std::pair<Id, ConnAction>> actions) {
  for (auto& [id, action] : actions) {
    const auto it = sockets_.find(id);
    if (it == sockets_.end()) continue;
    Socket& socket = it->second;
    if (socket.out_pos == socket.out.size()) {
      socket.out.swap(action.send);
      socket.out_pos = 0;
    } else {
      socket.out += action.send;
    }
    socket.closing |= action.close;
    flush(id);
    watch(id);
  }
}

void TcpStoreServerImpl::flush(Id id) {
  Socket& socket = sockets_.at(id);
  while (socket.out_pos < socket.out.size()) {
    const ssize_t n = ::send(socket.fd, socket.out.data() + socket.out_pos, socket.out.size() - socket.out_pos,
                             MSG_NOSIGNAL);
    if (n >= 0) {
      socket.out_pos += static_cast<size_t>(n);
      // Counted by what leaves: a reset whenever the buffer emptied let each small reply's
      // send release another 4 MiB one (3000 small gets, then big ones: 400 MiB held).
      core_.sent(id, static_cast<uint64_t>(n), Clock::now());
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (socket.send_deadline == Clock::time_point::max()) socket.send_deadline = Clock::now() + kSendTimeout;
      return;
    }
    core_.closed(id);  // the peer is gone
    close_socket(id);
    return;
  }
  socket.out.clear();
  socket.out_pos = 0;
  socket.send_deadline = Clock::time_point::max();
  if (socket.closing) {
    core_.closed(id);
    close_socket(id);
  }
}

void TcpStoreServerImpl::watch(Id id) {
  const auto it = sockets_.find(id);
  if (it == sockets_.end()) return;
  Socket& socket = it->second;
  uint32_t events = EPOLLRDHUP;
  if (core_.reading(id) && !socket.closing) events |= EPOLLIN;
  if (socket.out_pos < socket.out.size()) events |= EPOLLOUT;
  if (events == socket.events) return;
  socket.events = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, socket.fd, &ev);
}

void TcpStoreServerImpl::close_socket(Id id) {
  const auto it = sockets_.find(id);
  if (it == sockets_.end()) return;
  ::close(it->second.fd);  // also removes it from the epoll set
  sockets_.erase(it);
}

void TcpStoreServerImpl::expire_sends(Clock::time_point now) {
  std::vector<Id> late;
  for (const auto& [id, socket] : sockets_) {
    if (now >= socket.send_deadline) late.push_back(id);
  }
  for (const Id id : late) {
    ZDP_LOG(kWarn) << "store server :" << port_ << ": dropping a client that did not read its reply within "
                   << kSendTimeout.count() / 1000 << " s";
    core_.closed(id);
    close_socket(id);
  }
}

}  // namespace

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  const std::string where = host_port(options.bind_host, options.port);
  if (options.port < 0 || options.port > 65535) {
    return Status(StatusCode::kInvalidArgument,
                  "store server: port " + std::to_string(options.port) + " is not in 0..65535");
  }
  if (options.max_message_bytes < 64) {
    return Status(StatusCode::kInvalidArgument, "store server: max_message_bytes " +
                                                    std::to_string(options.max_message_bytes) + " is below 64");
  }
  if (options.max_connections < 1) {
    return Status(StatusCode::kInvalidArgument,
                  "store server: max_connections " + std::to_string(options.max_connections) + " is not positive");
  }
  if (options.auth_timeout.count() <= 0 || options.max_unauthenticated < 1) {
    return Status(StatusCode::kInvalidArgument, "store server: auth_timeout (" +
                                                    std::to_string(options.auth_timeout.count()) +
                                                    " ms) and max_unauthenticated (" +
                                                    std::to_string(options.max_unauthenticated) + ") must be positive");
  }
  // The frame length is a u32.
  const uint64_t max_message_bytes = std::min<uint64_t>(static_cast<uint64_t>(options.max_message_bytes), UINT32_MAX);

  std::string last_error = "no address";
  int err = 0;
  int listen_fd = listen_socket(options.bind_host, options.port, &last_error, &err);
  if (listen_fd < 0 && options.bind_host == "::" && (err == EAFNOSUPPORT || err == EADDRNOTAVAIL)) {
    // A host without IPv6 (not a port in use): the IPv4 wildcard serves what it can.
    std::string v4_error;
    listen_fd = listen_socket("0.0.0.0", options.port, &v4_error, &err);
    if (listen_fd >= 0) ZDP_LOG(kInfo) << "store server: no IPv6 here (" << last_error << "); listening on 0.0.0.0";
    else last_error += "; on 0.0.0.0: " + v4_error;
  }
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
  // A pipe wakes the loop at stop(): closing a listening socket under a blocked
  // epoll_wait is not reliable across kernels.
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    const std::string error = errno_text();
    ::close(listen_fd);
    return Status(StatusCode::kIoError, "store server: pipe: " + error);
  }
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  bool watched = epoll_fd >= 0;
  for (const auto& [fd, id] : {std::pair<int, Id>{listen_fd, kListenId}, {wake[0], kWakeId}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    watched = watched && ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0;
  }
  if (!watched) {
    const std::string error = errno_text();
    for (const int fd : {listen_fd, wake[0], wake[1], epoll_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return Status(StatusCode::kIoError, "store server: epoll: " + error);
  }
  tcp_store::ServerLimits limits;
  limits.max_message_bytes = max_message_bytes;
  limits.auth_timeout = options.auth_timeout;
  limits.max_unauthenticated = static_cast<size_t>(options.max_unauthenticated);
  limits.max_connections = static_cast<size_t>(options.max_connections);
  auto server = std::make_unique<TcpStoreServerImpl>(listen_fd, epoll_fd, wake[0], wake[1], port, options.secret,
                                                     limits);
  try {
    server->start_loop();
  } catch (const std::system_error& e) {
    return Status(StatusCode::kIoError, "store server: cannot start its thread: " + std::string(e.what()));
  }
  ZDP_LOG(kDebug) << "store server listening on " << host_port(options.bind_host, port);
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace zdp
