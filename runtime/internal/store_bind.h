// Where a job's store listens, given the address its clients connect to
// (launch.master_addr / MASTER_ADDR): dp-launch's node 0 and a rank 0 started without
// dp-launch both use it.
#pragma once

#include <string>

namespace zdp {

// Only this machine's processes connect (one node): `master_addr` itself, where they
// connect (the default 127.0.0.1 keeps the store on the loopback; an address that is not
// this machine's fails to bind, naming it, instead of leaving the ranks to time out).
// Other machines connect: every interface, IPv6 ones ("::", which Linux serves IPv4 on
// too) when `master_addr` is an IPv6 address ("fd00::5"). The IPv4 wildcard alone left
// ranks told to reach an IPv6 address retrying "connection refused" until their timeout.
inline std::string store_bind_host(const std::string& master_addr, bool other_machines_connect) {
  if (!other_machines_connect) return master_addr;
  return master_addr.find(':') != std::string::npos ? "::" : "0.0.0.0";
}

}  // namespace zdp
