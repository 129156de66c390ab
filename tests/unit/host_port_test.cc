// host_port (core/internal/host_port.h): an IPv6 address in brackets, nothing else changed.
// The store's messages printed "fd00::2:41611", which reads as one longer address.
#include "core/internal/host_port.h"

#include <gtest/gtest.h>

namespace zdp {
namespace {

TEST(HostPort, AnIpv6AddressIsBracketed) {
  EXPECT_EQ(host_port("fd00::2", 41611), "[fd00::2]:41611");
  EXPECT_EQ(host_port("::", 29500), "[::]:29500");
  EXPECT_EQ(host_port("[::1]", 29500), "[::1]:29500");  // already bracketed
  EXPECT_EQ(host_port("192.0.2.2", 29500), "192.0.2.2:29500");
  EXPECT_EQ(host_port("node-0.cluster", 1), "node-0.cluster:1");
}

}  // namespace
}  // namespace zdp
