// choose_rank_address: the address a rank advertises to its Gloo peers (see rank_address.h).
#include "runtime/internal/rank_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/internal/printable.h"

namespace zdp {
namespace {

// Closes a socket when it goes out of scope.
struct SocketCloser {
  int fd = -1;
  ~SocketCloser() {
    if (fd >= 0) ::close(fd);
  }
};

using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// getaddrinfo for a datagram socket; the message names the host on failure.
StatusOr<AddrInfoPtr> resolve(const std::string& host, int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return Status(StatusCode::kUnavailable, "'" + host + "' does not resolve: " + ::gai_strerror(rc));
  return AddrInfoPtr(found, &::freeaddrinfo);
}

std::string numeric_host(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {0};
  if (::getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return host;
}

// The first name of a comma-separated list, as Gloo's users write GLOO_SOCKET_IFNAME.
std::string first_name(const std::string& list) { return list.substr(0, list.find(',')); }

}  // namespace

bool is_loopback_address(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

std::string RankAddress::describe() const {
  if (!iface.empty()) return "the address of interface " + iface + " (" + origin + ")";
  return address + " (" + origin + ")";
}

StatusOr<std::string> local_address_toward(const std::string& host, int port) {
  ZDP_ASSIGN_OR_RETURN(AddrInfoPtr list, resolve(host, port, 0));
  std::string last_error = "no address";
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    SocketCloser s{::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol)};
    if (s.fd < 0 || ::connect(s.fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const std::string text = numeric_host(reinterpret_cast<const sockaddr*>(&local), len);
    if (!text.empty()) return text;
  }
  return Status(StatusCode::kUnavailable, "no route from this host to '" + host + "': " + last_error);
}

StatusOr<RankAddress> choose_rank_address(const LaunchConfig& launch, const std::string& master_addr, int master_port,
                                          const EnvLookup& env, bool one_host) {
  RankAddress a;
  a.explicit_choice = true;
  if (!launch.rank_addr.empty()) {
    a.address = launch.rank_addr;
    a.origin = "launch.rank_addr";
    return a;
  }
  if (!launch.socket_ifname.empty()) {
    a.iface = launch.socket_ifname;
    a.origin = "launch.socket_ifname";
    return a;
  }
  if (const char* v = env("GLOO_SOCKET_IFNAME"); v != nullptr && *v != '\0') {
    a.iface = first_name(v);
    a.origin = "GLOO_SOCKET_IFNAME";
    return a;
  }
  a.explicit_choice = false;
  StatusOr<std::string> local = local_address_toward(master_addr, master_port);
  if (!local.ok()) {
    return local.status().with_context("choosing the address this rank advertises (the local address routing to "
                                       "master_addr; set launch.rank_addr or launch.socket_ifname)");
  }
  a.address = *local;
  a.origin = "the local address routing to master_addr " + master_addr;
  // A master_addr written as loopback is a job on one host whatever its node count (the
  // launcher's tests run nodes side by side that way).
  if (one_host || is_loopback_address(master_addr) || !is_loopback_address(a.address)) return a;
  // This host is master_addr and names itself by a loopback address, which the job's
  // other hosts cannot reach. The default route's source address is the one they most
  // likely share (a documentation address as the target: connecting a UDP socket sends
  // nothing, it only asks the routing table).
  const bool v6 = a.address.find(':') != std::string::npos;
  StatusOr<std::string> outward = local_address_toward(v6 ? "2001:db8::1" : "198.51.100.1", 9);
  const std::string why = "master_addr " + master_addr + " routes to loopback " + a.address +
                          " on this host, which the job's other hosts cannot reach";
  if (!outward.ok() || is_loopback_address(*outward)) {
    return Status(StatusCode::kUnavailable, why + ", and this host has no default route whose address it could "
                                                  "advertise instead: set launch.socket_ifname to the interface the "
                                                  "hosts share (or launch.rank_addr), or master_addr to its address");
  }
  a.address = *outward;
  a.origin = "the address of this host's default route (" + why + ")";
  return a;
}

Status check_rank_address(const RankAddress& a) {
  if (!a.iface.empty()) {
    if (::if_nametoindex(a.iface.c_str()) == 0) {
      return Status(StatusCode::kInvalidArgument, a.origin + " = \"" + printable(a.iface, 64) +
                                                      "\": this host has no such network interface (`ip -br addr` "
                                                      "lists them)");
    }
    ifaddrs* all = nullptr;
    bool has_address = false;
    if (::getifaddrs(&all) == 0) {
      for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr && a.iface == i->ifa_name &&
            (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
          has_address = true;
        }
      }
      ::freeifaddrs(all);
    }
    if (!has_address) {
      return Status(StatusCode::kInvalidArgument,
                    a.origin + " = \"" + printable(a.iface, 64) + "\": the interface has no IPv4 or IPv6 address to advertise");
    }
    return Status::Ok();
  }
  // An address of this host is one a socket can bind (port 0: any free port).
  StatusOr<AddrInfoPtr> list = resolve(a.address, 0, AI_PASSIVE);
  if (!list.ok()) return Status(StatusCode::kInvalidArgument, a.origin + " = \"" + a.address + "\": " + list.status().message());
  std::string last_error = "no address";
  for (const addrinfo* ai = list->get(); ai != nullptr; ai = ai->ai_next) {
    SocketCloser s{::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol)};
    if (s.fd >= 0 && ::bind(s.fd, ai->ai_addr, ai->ai_addrlen) == 0) return Status::Ok();
    last_error = std::strerror(errno);
  }
  return Status(StatusCode::kInvalidArgument, a.origin + " = \"" + a.address +
                                                  "\" is not an address of this host (bind: " + last_error + ")");
}

}  // namespace zdp
