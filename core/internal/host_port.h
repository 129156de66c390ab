// "host:port" as a person (and a URL) writes it: an IPv6 address in brackets, so that
// "fd00::2:41611" does not read as one longer address ("[fd00::2]:41611").
#pragma once

#include <string>

namespace zdp {

inline std::string host_port(const std::string& host, int port) {
  const bool bare_ipv6 = host.find(':') != std::string::npos && host.front() != '[';  // non-empty: it holds ':'
  return (bare_ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace zdp
