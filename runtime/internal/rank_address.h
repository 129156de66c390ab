// Which address a rank advertises to its peers for Gloo's TCP connections. The peers of a
// multi-node job must reach it, so 127.0.0.1 is right only when the whole job is on one
// host: by default a rank advertises the local address of the interface that routes to
// master_addr. On node 0 of a multi-node job that route can be loopback although
// master_addr is not written as loopback (Debian and Ubuntu map the host's own name to
// 127.0.1.1 in /etc/hosts, and Slurm's master_addr is that name): the rank then advertises
// the source address of this host's default route instead, or refuses, saying which keys
// choose. zdp::init uses this, and dp-launch to check the choice and print it before
// anything starts.
#pragma once

#include <string>

#include "zdp/config.h"
#include "zdp/launch_env.h"
#include "zdp/status.h"

namespace zdp {

struct RankAddress {
  std::string iface;    // bind this network interface's address (set: `address` is empty)
  std::string address;  // else bind and advertise this address (or host name)
  std::string origin;   // why: "launch.rank_addr", "GLOO_SOCKET_IFNAME", "the local address routing to ..."
  bool explicit_choice = false;  // given by a key or GLOO_SOCKET_IFNAME, not derived
  // "10.1.0.2 (the local address routing to master_addr 10.1.0.1)", "interface eth1 (GLOO_SOCKET_IFNAME)".
  std::string describe() const;
};

// The address this host sends from to reach host:port: the source address the kernel
// picks for a UDP socket connected to it (connecting a UDP socket sends nothing).
// kUnavailable naming the host when it does not resolve or no route leads to it.
StatusOr<std::string> local_address_toward(const std::string& host, int port);

// Whether `host` is written as a loopback address: localhost, 127.*, ::1 or [::1].
bool is_loopback_address(const std::string& host);

// The first of `launch.rank_addr`, `launch.socket_ifname`, $GLOO_SOCKET_IFNAME (its first
// name when it lists several) and the local address routing to master_addr:master_port.
// `env` looks up the rank's environment. When the job spans several hosts (`one_host`
// false) and that route is loopback although master_addr is not written as loopback, the
// default route's source address; kUnavailable when this host has none.
StatusOr<RankAddress> choose_rank_address(const LaunchConfig& launch, const std::string& master_addr, int master_port,
                                          const EnvLookup& env, bool one_host);

// Whether this host can bind `a`: the interface exists and has an address, or the address
// is one of this host's. kInvalidArgument naming the interface or address and its origin.
Status check_rank_address(const RankAddress& a);

}  // namespace zdp
