// The store server's listening socket (tcp_store_server.cc).
#pragma once

#include <string>

namespace zdp {

// A listening socket on host:port (the first of its addresses that binds), or -1 with
// *error saying why and *err the last errno. An IPv6 wildcard serves IPv4 clients too
// (IPV6_V6ONLY off, whatever the host's default): a store that may be reached by a host
// name listens on "::". Non-blocking, close-on-exec, SO_REUSEADDR.
int listen_socket(const std::string& host, int port, std::string* error, int* err);

}  // namespace zdp
