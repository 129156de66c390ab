// TCP store servers and clients for tests (store_test, tcp_store_test): a server on a
// free port of the loopback interface, clients that connect to it, and a port that is free.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include <gtest/gtest.h>

#include "testing/free_port.h"
#include "zdp/tcp_store.h"

namespace zdp::testing {

inline constexpr std::chrono::milliseconds kLong{5000};  // "succeeds well before this" in tests that must not time out

inline std::unique_ptr<TcpStoreServer> start_server(int port = 0, int64_t max_message_bytes = 1 << 20) {
  TcpStoreServerOptions options;
  options.port = port;
  options.max_message_bytes = max_message_bytes;
  auto server = TcpStoreServer::start(options);
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(*server) : nullptr;
}

inline std::unique_ptr<TcpStoreClient> connect_client(int port) {
  auto client = TcpStoreClient::connect("127.0.0.1", port, kLong);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(*client) : nullptr;
}

}  // namespace zdp::testing
