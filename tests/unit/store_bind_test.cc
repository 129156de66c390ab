// Where a multi-node job's store listens (runtime/internal/store_bind.h): an IPv4 address
// binds the IPv4 wildcard; an IPv6 address or a host name binds "::", dual-stack, so that
// clients reach it over IPv4 and IPv6 alike (a name that other hosts resolved to IPv6 only
// met a store on 0.0.0.0: connection refused until the timeout).
#include "runtime/internal/store_bind.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "testing/ipv6_loopback.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

TEST(StoreBind, AddressesAndNames) {
  EXPECT_EQ(store_bind_host("127.0.0.1", false), "127.0.0.1");
  EXPECT_EQ(store_bind_host("10.0.0.1", true), "0.0.0.0");
  EXPECT_EQ(store_bind_host("fd00::5", true), "::");
  EXPECT_EQ(store_bind_host("head", true), "::");
}

// A store on "::" serves an IPv4 client, and an IPv6 one where the host has IPv6.
TEST(StoreBind, TheDualStackWildcardServesBothFamilies) {
  TcpStoreServerOptions o;
  o.bind_host = "::";
  auto server = TcpStoreServer::start(o);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const int port = (*server)->port();
  auto v4 = TcpStoreClient::connect("127.0.0.1", port, 5s);
  ASSERT_TRUE(v4.ok()) << v4.status().to_string();
  ASSERT_TRUE((*v4)->set("k", "v").ok());
  if (!testing::has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback here (the IPv4 client was served)";
  auto v6 = TcpStoreClient::connect("::1", port, 5s);
  ASSERT_TRUE(v6.ok()) << v6.status().to_string();
  EXPECT_EQ((*v6)->get("k", 5s).value(), "v");
}

}  // namespace
}  // namespace zdp
