#include "runtime/src/store/listen_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zdp {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

int listen_socket(const std::string& host, int port, std::string* error, int* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addrs = nullptr;
  const std::string port_text = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &addrs);
  if (rc != 0) {
    *error = std::string("cannot resolve: ") + ::gai_strerror(rc);
    return -1;
  }
  int listen_fd = -1;
  for (addrinfo* a = addrs; a != nullptr && listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *err = errno;
      *error = "socket: " + errno_text();
      continue;
    }
    // SO_REUSEADDR: a restarted launcher can rebind its port while old connections linger in TIME_WAIT.
    const int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *err = errno;
      *error = "bind: " + errno_text();
      ::close(fd);
      continue;
    }
    if (::listen(fd, SOMAXCONN) != 0) {
      *err = errno;
      *error = "listen: " + errno_text();
      ::close(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(addrs);
  return listen_fd;
}

}  // namespace zdp
