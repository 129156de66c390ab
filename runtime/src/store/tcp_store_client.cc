// TcpStoreClient: a rank's connection to the store server. Each call is one request and
// its reply under a mutex, read against a deadline so that a dead server is an error.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/internal/host_port.h"
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

// set/add/check are answered at once; this only bounds a server that is stuck or gone
// without closing the connection (host down, network partition).
constexpr std::chrono::milliseconds kRequestTimeout{60000};
// get/wait are answered by their own timeout; the slack covers the network and a busy
// server, so the server's "timed out, missing: ..." reply normally wins over ours.
constexpr std::chrono::milliseconds kReplySlack{5000};
// A call of a client whose `stop` says true gives up on a reply not there by this long
// after it was sent: a store that stopped answering held a launcher stopped by a signal
// for the whole request timeout, while a healthy one still takes its last words (a job
// failure posted for the other nodes) within it.
constexpr std::chrono::milliseconds kStopGrace{1000};
// Connect retries back off from the first to the last value, doubling.
constexpr std::chrono::milliseconds kFirstBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{250};
// One address's try: a refused connect fails at once, one whose packets are dropped would
// otherwise take the whole timeout and the host's other addresses would never be tried.
constexpr std::chrono::milliseconds kPerAddressTimeout{5000};
// A store that cannot be reached is reported after this long, then this often.
constexpr std::chrono::milliseconds kFirstWaitingNote{3000};
constexpr std::chrono::milliseconds kWaitingNoteEvery{10000};

std::string seconds_text(std::chrono::milliseconds t) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

std::chrono::milliseconds plus_slack(std::chrono::milliseconds timeout) {
  const auto forever = std::chrono::milliseconds(std::chrono::hours(24 * 365));
  return timeout >= forever - kReplySlack ? forever : std::max(timeout, std::chrono::milliseconds(0)) + kReplySlack;
}

// Key as shown in an operation name; keys may be up to 4 KiB.
std::string shown_key(const std::string& key) { return key.size() <= 80 ? key : key.substr(0, 80) + "..."; }

// One non-blocking connect attempt, bounded by `deadline`. Returns the fd, or -1 with *error set.
int connect_once(const addrinfo& a, Clock::time_point deadline, std::string* error) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int err = 0;
  if (::connect(fd, a.ai_addr, a.ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const int n = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30)));
      socklen_t len = sizeof(err);
      if (n == 0) {
        err = ETIMEDOUT;
      } else if (n < 0) {
        err = errno;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
  }
  if (err != 0) {
    *error = std::strerror(err);
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

class TcpStoreClientImpl final : public TcpStoreClient {
 public:
  TcpStoreClientImpl(int fd, std::string address, std::function<bool()> stop)
      : address_(std::move(address)), fd_(fd), stop_(std::move(stop)) {}
  ~TcpStoreClientImpl() override { ::close(fd_); }

  Status set(const std::string& key, const std::string& value) override {
    Request request;
    request.op = Op::kSet;
    request.key = key;
    request.value = value;
    return call("set(\"" + shown_key(key) + "\")", request, kRequestTimeout).status();
  }

  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override {
    Request request;
    request.op = Op::kGet;
    request.key = key;
    request.number = timeout.count();
    const std::string what = "get(\"" + shown_key(key) + "\")";
    ZDP_ASSIGN_OR_RETURN(Response response, call(what, request, plus_slack(timeout)));
    if (response.reply == Reply::kTimeout) return timeout_error(what, response, 1, timeout);
    return std::move(response.value);
  }

  StatusOr<int64_t> add(const std::string& key, int64_t delta) override {
    Request request;
    request.op = Op::kAdd;
    request.key = key;
    request.number = delta;
    const std::string what = "add(\"" + shown_key(key) + "\")";
    ZDP_ASSIGN_OR_RETURN(Response response, call(what, request, kRequestTimeout));
    if (response.reply == Reply::kInvalidArgument) {
      return Status(StatusCode::kInvalidArgument, response.message).with_context(context());
    }
    return response.number;
  }

  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Request request;
    request.op = Op::kWait;
    request.keys = keys;
    request.number = timeout.count();
    const std::string what = "wait(" + std::to_string(keys.size()) + " keys)";
    ZDP_ASSIGN_OR_RETURN(Response response, call(what, request, plus_slack(timeout)));
    if (response.reply == Reply::kTimeout) return timeout_error(what, response, keys.size(), timeout);
    return Status::Ok();
  }

  // Presents the job secret; the server answers OK or refuses and hangs up. The answer is
  // awaited until `deadline` (the connection's own, not a fixed minute: a store that
  // accepts and never answers held a connect with a 10 s timeout for 60 s), and no longer
  // once `stop` says so (Ctrl-C).
  Status authenticate(const std::string& secret, Clock::time_point deadline, const std::function<bool()>& stop) {
    Request request;
    request.op = Op::kAuth;
    request.value = secret;
    sent_secret_ = true;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    ZDP_ASSIGN_OR_RETURN(Response response, call("auth", request, std::max(left, std::chrono::milliseconds(1)), &stop,
                                                  std::chrono::milliseconds(0)));
    if (response.reply == Reply::kInvalidArgument) {
      return Status(StatusCode::kInvalidArgument, context() + " refused this client: " + response.message +
                                                      " (check ZDP_JOB_SECRET)");
    }
    return Status::Ok();
  }

  StatusOr<bool> check(const std::vector<std::string>& keys) override {
    Request request;
    request.op = Op::kCheck;
    request.keys = keys;
    ZDP_ASSIGN_OR_RETURN(Response response,
                         call("check(" + std::to_string(keys.size()) + " keys)", request, kRequestTimeout));
    return response.present;
  }

 private:
  std::string context() const { return "store at " + address_; }

  Status timeout_error(const std::string& what, const Response& response, size_t total,
                       std::chrono::milliseconds timeout) const {
    return store_timeout_error(response.missing, total, timeout).with_context(context() + ": " + what);
  }

  // One request and its reply, bounded by the client's own stop (kStopGrace after it).
  StatusOr<Response> call(const std::string& what, const Request& request, std::chrono::milliseconds reply_timeout) {
    return call(what, request, reply_timeout, stop_ ? &stop_ : nullptr, kStopGrace);
  }

  // One request and its reply. A transport or protocol error leaves the stream at an
  // unknown position, so it breaks the connection for every later call too.
  // With `stop`: once it says true and `grace` has passed since the request was sent, the
  // reply is given up (kAborted).
  StatusOr<Response> call(const std::string& what, const Request& request, std::chrono::milliseconds reply_timeout,
                          const std::function<bool()>* stop, std::chrono::milliseconds grace) {
    ZDP_RETURN_IF_ERROR(tcp_store::check_request_limits(request).with_context(context() + ": " + what));
    const std::string frame = tcp_store::encode_request(request);
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) {
      return Status(StatusCode::kIoError, context() + ": " + what +
                                              ": the connection is unusable after an earlier error (" + broken_ + ")");
    }
    const Clock::time_point deadline = tcp_store::deadline_after(reply_timeout);
    const Clock::time_point sent = Clock::now();
    Status s = tcp_store::send_all(fd_, frame, deadline);
    // With `stop`: the reply awaited in slices that look at it.
    while (s.ok() && stop != nullptr && *stop) {
      pollfd p{fd_, POLLIN, 0};
      const auto slice = std::min(std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()),
                                  std::chrono::milliseconds(200));
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(slice.count(), 0)));
      // EINTR is the signal `stop` is about (it broke out to a read that waited 60 s).
      if ((ready < 0 && errno != EINTR) || ready > 0 || Clock::now() >= deadline) break;
      if (Clock::now() - sent >= grace && (*stop)()) s = Status(StatusCode::kAborted, "stopped while waiting for the reply");
    }
    std::string payload;
    if (s.ok()) s = tcp_store::read_frame(fd_, tcp_store::kMaxResponseBytes, deadline, reply_timeout, &payload);
    Response response;
    if (s.ok()) s = tcp_store::decode_response(request.op, payload, &response);
    if (s.ok()) return response;

    std::string message = s.message();
    if (s.code() == StatusCode::kTimeout) message = "no reply within " + seconds_text(reply_timeout);
    if (s.code() == StatusCode::kPeerFailure) {
      message = "the server closed the connection";
      if (!sent_secret_) message += " (a store that requires a job secret does this: set ZDP_JOB_SECRET)";
    }
    // The server drops requests over its max_message_bytes by closing the connection.
    if (frame.size() > (1u << 20)) message += " (the request was " + std::to_string(frame.size()) +
                                             " bytes; the server may refuse requests over its max_message_bytes)";
    broken_ = what + ": " + message;
    ::shutdown(fd_, SHUT_RDWR);
    const StatusCode code = s.code() == StatusCode::kTimeout || s.code() == StatusCode::kAborted ? s.code()
                                                                                                  : StatusCode::kIoError;
    return Status(code, context() + ": " + broken_);
  }

  const std::string address_;  // "host:port", in every error
  std::mutex mu_;              // one request/reply on the wire at a time
  bool sent_secret_ = false;   // for the hint when the server hangs up
  const int fd_;
  const std::function<bool()> stop_;  // connect()'s, for every call (kStopGrace)
  std::string broken_;  // why the connection broke; empty while it works
};

}  // namespace

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(const std::string& host, int port,
                                                                  std::chrono::milliseconds connect_timeout,
                                                                  const std::string& secret,
                                                                  const std::string& host_note,
                                                                  const std::function<bool()>& stop) {
  const std::string address = host_port(host, port);
  if (port <= 0 || port > 65535) {
    return Status(StatusCode::kInvalidArgument, "store at " + address + ": port is not in 1..65535");
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = tcp_store::deadline_after(connect_timeout);
  Clock::time_point next_note = start + kFirstWaitingNote;
  std::chrono::milliseconds backoff = kFirstBackoff;
  std::string last_error;
  int attempts = 0;
  while (true) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs);
    if (rc == 0) {
      int fd = -1;
      for (addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
        fd = connect_once(*a, std::min(deadline, Clock::now() + kPerAddressTimeout), &last_error);
      }
      ::freeaddrinfo(addrs);
      if (fd >= 0) {
        auto client = std::make_unique<TcpStoreClientImpl>(fd, address, stop);
        // At least a second for the answer, however little of the connect's time is left.
        const Clock::time_point auth_deadline =
            std::max(std::min(deadline, Clock::now() + kRequestTimeout), Clock::now() + std::chrono::seconds(1));
        const Status auth = secret.empty() ? Status::Ok() : client->authenticate(secret, auth_deadline, stop);
        if (auth.code() == StatusCode::kAborted) {
          return Status(StatusCode::kAborted, "stopped connecting to the store at " + address + ": " + auth.message());
        }
        if (auth.ok()) {
          ZDP_LOG(kDebug) << "connected to the store at " << address << " after " << attempts << " attempt(s)";
          return std::unique_ptr<TcpStoreClient>(std::move(client));
        }
        // A refusal is final; a connection closed before the answer (a server busy
        // shedding unauthenticated connections) is worth another try.
        if (auth.code() == StatusCode::kInvalidArgument) return auth;
        last_error = auth.message();
      }
    } else if (rc == EAI_AGAIN || rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_FAIL) {
      // A resolver hiccup, or a name not (yet) in DNS: a Kubernetes pod's name resolves
      // only once the pod runs, so ranks that start first wait for it as for the store.
      last_error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    } else {
      return Status(StatusCode::kIoError, "store at " + address + ": cannot resolve host: " + ::gai_strerror(rc));
    }
    // Refused or unreachable: the server may not be up yet (ranks can start before it).
    if (stop && stop()) {
      return Status(StatusCode::kAborted, "stopped connecting to the store at " + address + " after " +
                                              std::to_string(attempts) + " attempts (last error: " + last_error + ")");
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_note) {
      ZDP_LOG(kWarn) << "waiting for the store at " << address << (host_note.empty() ? "" : " (" + host_note + ")")
                     << ": " << last_error << "; " << seconds_text(std::chrono::ceil<std::chrono::milliseconds>(now - start))
                     << " so far, giving up after " << seconds_text(connect_timeout);
      next_note = now + kWaitingNoteEvery;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  return Status(StatusCode::kTimeout, "cannot connect to the store at " + address +
                                          (host_note.empty() ? "" : " (" + host_note + ")") + " within " +
                                          seconds_text(connect_timeout) + " (" + std::to_string(attempts) +
                                          " attempts; last error: " + last_error + ")");
}

}  // namespace zdp
