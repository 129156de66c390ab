// Where a job's store listens, given the address its clients connect to
// (launch.master_addr / MASTER_ADDR): dp-launch's node 0 and a rank 0 started without
// dp-launch both use it.
#pragma once

#include <arpa/inet.h>

#include <string>

namespace zdp {

// Only this machine's processes connect (one node): `master_addr` itself, where they
// connect (the default 127.0.0.1 keeps the store on the loopback; an address that is not
// this machine's fails to bind, naming it, instead of leaving the ranks to time out).
// Other machines connect: every interface. An IPv4 address: the IPv4 wildcard. An IPv6
// address or a host name (which other hosts may resolve to IPv6 only): "::", which the
// server opens dual-stack, serving IPv4 too, and falls back to 0.0.0.0 on a host without
// IPv6. The IPv4 wildcard alone left ranks told to reach an IPv6 address (or a name that
// resolved to one) retrying "connection refused" until their timeout.
inline std::string store_bind_host(const std::string& master_addr, bool other_machines_connect) {
  if (!other_machines_connect) return master_addr;
  in_addr v4{};
  return ::inet_pton(AF_INET, master_addr.c_str(), &v4) == 1 ? "0.0.0.0" : "::";
}

}  // namespace zdp
