// The TCP rendezvous store: a server hosted by the node-0 launcher (or a test) and a
// client per rank. Wire protocol and limits: runtime/src/store/tcp_store_protocol.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "zdp/store.h"

namespace zdp {

struct TcpStoreServerOptions {
  // Address to listen on. Loopback by default: a single-node job is not reachable from
  // other machines. Multi-node jobs pass "0.0.0.0" (or a specific interface address).
  std::string bind_host = "127.0.0.1";
  // 0 picks a free port; read it back with port().
  int port = 0;
  // Largest request accepted; a larger (or malformed) one closes that connection only.
  int64_t max_message_bytes = 64ll << 20;
  // The job secret. Non-empty: a client must present it before its first request, or the
  // connection is refused (and logged with the client's address). Empty: no check.
  std::string secret;
};

class TcpStoreServer {
 public:
  // Binds, listens and starts serving on a background thread.
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
  // `secret` when it is not empty (a refusal is kInvalidArgument naming the store).
  static StatusOr<std::unique_ptr<TcpStoreClient>> connect(const std::string& host, int port,
                                                          std::chrono::milliseconds connect_timeout,
                                                          const std::string& secret = "");
};

}  // namespace zdp
