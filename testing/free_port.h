// A loopback TCP port that was free a moment ago, for tests and benchmarks that start a
// rendezvous store or a job of their own (one helper: it was copied into four files).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace zdp::testing {

// Binds a temporary socket to port 0 and reads back the port the kernel chose. Another
// process may take it before the caller binds it; the callers' jobs then fail naming
// the port. If the kernel will not say, a pid-derived port in 29500-39499 instead.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 29500 + ::getpid() % 10000;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace zdp::testing
