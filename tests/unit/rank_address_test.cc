// choose_rank_address: what a Gloo rank advertises to its peers, in precedence order, and
// the checks of an explicit choice. (The choice across real hosts: tests/multiproc/multihost_test.cc.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <string>

#include "runtime/internal/rank_address.h"
#include "testing/fake_env.h"

namespace zdp {
namespace {

EnvLookup fake(const std::map<std::string, std::string>& vars) { return testing::fake_env(vars); }

TEST(RankAddress, LoopbackMasterMeansLoopback) {
  EXPECT_EQ(local_address_toward("127.0.0.1", 29500).value(), "127.0.0.1");
  const RankAddress a = choose_rank_address(LaunchConfig{}, "127.0.0.1", 29500, fake({}), true).value();
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_TRUE(a.iface.empty());
  EXPECT_FALSE(a.explicit_choice);
  EXPECT_EQ(a.describe(), "127.0.0.1 (the local address routing to master_addr 127.0.0.1)");
}

TEST(RankAddress, KeysBeatTheEnvironmentWhichBeatsTheRoute) {
  LaunchConfig l;
  const EnvLookup env = fake({{"GLOO_SOCKET_IFNAME", "eth7,eth8"}});
  RankAddress a = choose_rank_address(l, "127.0.0.1", 1, env, true).value();
  EXPECT_EQ(a.iface, "eth7");  // the first of a list, as Gloo's users write it
  EXPECT_EQ(a.origin, "GLOO_SOCKET_IFNAME");
  l.socket_ifname = "eth1";
  a = choose_rank_address(l, "127.0.0.1", 1, env, true).value();
  EXPECT_EQ(a.iface, "eth1");
  EXPECT_EQ(a.origin, "launch.socket_ifname");
  EXPECT_EQ(a.describe(), "the address of interface eth1 (launch.socket_ifname)");
  l.rank_addr = "10.1.2.3";
  a = choose_rank_address(l, "127.0.0.1", 1, env, true).value();
  EXPECT_EQ(a.address, "10.1.2.3");
  EXPECT_TRUE(a.iface.empty());
  EXPECT_EQ(a.origin, "launch.rank_addr");
  EXPECT_TRUE(a.explicit_choice);
}

TEST(RankAddress, AMasterThatDoesNotResolveIsNamed) {
  const StatusOr<RankAddress> a = choose_rank_address(LaunchConfig{}, "no-such-host.invalid", 29500, fake({}), true);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("'no-such-host.invalid' does not resolve"), std::string::npos)
      << a.status().message();
  EXPECT_NE(a.status().message().find("set launch.rank_addr or launch.socket_ifname"), std::string::npos);
}

TEST(RankAddress, ExplicitChoicesMustExistOnThisHost) {
  EXPECT_TRUE(check_rank_address({"lo", "", "launch.socket_ifname", true}).ok());
  EXPECT_TRUE(check_rank_address({"", "127.0.0.1", "launch.rank_addr", true}).ok());
  const Status no_if = check_rank_address({"zdpnosuch0", "", "GLOO_SOCKET_IFNAME", true});
  EXPECT_EQ(no_if.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_if.message().find("GLOO_SOCKET_IFNAME = \"zdpnosuch0\": this host has no such network interface"),
            std::string::npos)
      << no_if.message();
  const Status foreign = check_rank_address({"", "192.0.2.77", "launch.rank_addr", true});  // RFC 5737 TEST-NET-1
  EXPECT_NE(foreign.message().find("launch.rank_addr = \"192.0.2.77\" is not an address of this host"),
            std::string::npos)
      << foreign.message();
}

// Node 0 of a multi-host job whose master_addr names this host by a name that resolves
// to loopback (Debian's 127.0.1.1 for the host name): the rank does not advertise
// loopback. It takes the default route's address, or refuses saying which keys choose. A
// master_addr written as loopback stays loopback (nodes side by side on one host), and so
// does a job on one host.
TEST(RankAddress, AMultiHostJobNeverAdvertisesLoopbackForAHostName) {
  char own[256] = {0};
  ::gethostname(own, sizeof(own) - 1);
  std::string name, loopback;
  for (const std::string& candidate : {std::string(own), std::string("ip6-localhost"), std::string("ip6-loopback")}) {
    const StatusOr<std::string> route = local_address_toward(candidate, 1);
    if (!candidate.empty() && route.ok() && is_loopback_address(*route)) {
      name = candidate, loopback = *route;
      break;
    }
  }
  if (name.empty()) GTEST_SKIP() << "neither this host's name nor ip6-localhost routes to loopback here";
  const StatusOr<RankAddress> multi = choose_rank_address(LaunchConfig{}, name, 29500, fake({}), false);
  if (multi.ok()) {
    EXPECT_FALSE(is_loopback_address(multi->address)) << multi->address;
    EXPECT_NE(multi->origin.find("default route"), std::string::npos) << multi->origin;
  } else {
    EXPECT_NE(multi.status().message().find("set launch.socket_ifname"), std::string::npos) << multi.status().message();
  }
  EXPECT_EQ(choose_rank_address(LaunchConfig{}, name, 29500, fake({}), true).value().address, loopback);
  EXPECT_EQ(choose_rank_address(LaunchConfig{}, "::1", 29500, fake({}), false).value().address, "::1");
  EXPECT_EQ(choose_rank_address(LaunchConfig{}, "127.0.0.1", 29500, fake({}), false).value().address, "127.0.0.1");
}

}  // namespace
}  // namespace zdp
