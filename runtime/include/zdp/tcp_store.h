// The TCP rendezvous store: a server hosted by the node-0 launcher (or a test) and a
// client per rank. Wire protocol and limits: runtime/src/store/tcp_store_protocol.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "zdp/store.h"

namespace zdp {

struct TcpStoreServerOptions {
  // Address to listen on. Loopback by default: a single-node job is not reachable from
  // other machines. Multi-node jobs pass "0.0.0.0", or "::" (dual-stack: IPv4 clients too;
  // 0.0.0.0 where the host has no IPv6), or a specific interface address.
  std::string bind_host = "127.0.0.1";
  // 0 picks a free port; read it back with port().
  int port = 0;
  // Largest request accepted from a client that presented the secret; a larger (or
  // malformed) one closes that connection only. Before the secret, a frame may be at
  // most a few KiB (an auth request).
  int64_t max_message_bytes = 64ll << 20;
  // The job secret. Non-empty: a client must present it before its first request, or the
  // connection is refused. Refusals are counted and logged with the client's address,
  // one line and one summary per 10 s at most. Empty: no check.
  std::string secret;
  // With a secret: a connection must present it within this long after it is accepted.
  std::chrono::milliseconds auth_timeout{5000};
  // With a secret: at most this many connections may wait to present it; one more
  // closes the oldest of them (so idle connections cannot lock the ranks out; a client
  // whose connection was closed this way connects again).
  int max_unauthenticated = 64;
  // Connections held at once; one more is refused. A rank holds two (its calls and its
  // heartbeat) and each node's launcher one, so a job of more than ~2000 ranks needs more:
  // dp-launch and a rank 0 that hosts the store size it from the world size.
  int max_connections = 4096;
};

class TcpStoreServer {
 public:
  // Binds, listens and starts serving on one background thread (an event loop over
  // every connection; waiting requests hold no thread).
  static StatusOr<std::unique_ptr<TcpStoreServer>> start(const TcpStoreServerOptions& options);
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
  // Closes every connection and joins the server threads. Idempotent.
  virtual void stop() = 0;
};

class TcpStoreClient : public Store {
 public:
  // Connects to host:port, retrying refused/unreachable connections until
  // `connect_timeout` has passed (the server may start after the ranks), then presents
  // `secret` when it is not empty (a refusal is kInvalidArgument naming the store; a
  // connection closed before the answer is retried). While the store cannot be reached,
  // a warning says so after 3 s and every 10 s, with `host_note` (who hosts the store,
  // e.g. "rank 0 hosts it"); the final error names it too. Each of the host's addresses
  // gets at most 5 s a try, so one that drops packets (an IPv6 route a firewall
  // blackholes) does not keep the next from being tried. `stop`, when given, is asked
  // between tries: true gives up at once with kAborted (a launcher's Ctrl-C). It also
  // bounds the client's later calls: once it says true, a reply not there 1 s after its
  // request was sent is given up (kAborted), so a store that stopped answering no longer
  // holds a stopped launcher for a minute, and a healthy one still answers its last calls.
  static StatusOr<std::unique_ptr<TcpStoreClient>> connect(const std::string& host, int port,
                                                          std::chrono::milliseconds connect_timeout,
                                                          const std::string& secret = "",
                                                          const std::string& host_note = "",
                                                          const std::function<bool()>& stop = nullptr);
};

}  // namespace zdp
