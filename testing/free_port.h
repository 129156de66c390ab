// A loopback TCP port for tests and benchmarks that start a rendezvous store or a job of
// their own (one helper: it was copied into four files).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace zdp::testing {

namespace free_port_detail {

// The kernel's ephemeral range, from which it takes the source port of every outgoing
// connection. Defaults to Linux's 32768-60999 when the file cannot be read.
inline void ephemeral_range(int& lo, int& hi) {
  lo = 32768;
  hi = 60999;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int a = 0;
    int b = 0;
    if (std::fscanf(f, "%d %d", &a, &b) == 2 && a > 0 && b >= a && b < 65536) {
      lo = a;
      hi = b;
    }
    std::fclose(f);
  }
}

// Whether 127.0.0.1:port can be bound now (SO_REUSEADDR, as the store server binds, so a
// port whose last connections linger in TIME_WAIT still counts as free).
inline bool bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace free_port_detail

// A port P such that P and P + 1 (torchrun's convention puts the store at MASTER_PORT + 1)
// were free a moment ago.
//
// Why not bind(0): the kernel hands out a port from its ephemeral range, and between the
// pick and the job's own bind, any outgoing connection on the machine (a Gloo pair, a store
// client of a test running alongside) may take the same port as its source port. CI lost a
// job that way ("bind: Address already in use"). Ports below the ephemeral range are never
// used as source ports, so only another explicit pick can take one; each process walks its
// own slots, derived from its pid, so two tests running side by side (pids less than
// about 1,400 apart) never try the same port.
inline int free_port() {
  static std::atomic<unsigned> calls{0};
  constexpr unsigned kSlotsPerProcess = 8;
  int eph_lo = 0;
  int eph_hi = 0;
  free_port_detail::ephemeral_range(eph_lo, eph_hi);
  int lo = 10000;
  int hi = eph_lo;  // exclusive
  if (hi - lo < 2048) {  // an unusual ephemeral range: use the ports above it
    lo = eph_hi + 1;
    hi = 65535;
  }
  const unsigned slots = static_cast<unsigned>((hi - lo) / 2);
  if (slots == 0) return 29500 + ::getpid() % 10000;
  const unsigned first = static_cast<unsigned>(::getpid()) * kSlotsPerProcess + calls.fetch_add(1);
  for (unsigned i = 0; i < slots; ++i) {
    const int port = lo + static_cast<int>(((first + i) % slots) * 2);
    if (free_port_detail::bindable(port) && free_port_detail::bindable(port + 1)) {
      if (i > 0) calls.fetch_add(i);  // the next call starts past the ports found taken
      return port;
    }
  }
  return lo;  // nothing free: the caller's job fails naming the port
}

}  // namespace zdp::testing
