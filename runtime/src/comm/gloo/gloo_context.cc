// connect_gloo_context: Gloo's TCP rendezvous over our store.
#include "runtime/internal/gloo_context.h"


#include <chrono>
#include <cstdio>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "core/internal/broken_pipe.h"
#include "runtime/src/comm/close_on_exec.h"
#include "runtime/src/comm/gloo/gloo_peer_ranks.h"
#include "zdp/log.h"

namespace zdp {
namespace {

// Gloo's rendezvous talks to a gloo::rendezvous::Store; ours is a zdp::Store. Gloo
// expects failures as exceptions, which connect_gloo_context turns back into Status.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(zdp::Store& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, std::string(data.begin(), data.end())).throw_if_error();
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get(key, timeout_).value();
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout).throw_if_error();
  }

 private:
  zdp::Store& store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

StatusOr<std::shared_ptr<gloo::Context>> connect_gloo_context(Store& store, const std::string& prefix, int rank,
                                                               int world_size, const CommOptions& options,
                                                               GlooPeerRanks* peers) {
  const std::string advertised = !options.iface.empty()      ? "interface " + options.iface + "'s address"
                                 : !options.hostname.empty() ? options.hostname
                                                             : std::string("127.0.0.1");
  const std::string where = "rank " + std::to_string(rank) + ": gloo rendezvous of " + std::to_string(world_size) +
                            " ranks (this rank advertises " + advertised +
                            "; launch.rank_addr, launch.socket_ifname or GLOO_SOCKET_IFNAME choose another)";
  // Gloo's TCP pairs write to sockets without MSG_NOSIGNAL: when a peer dies mid-send the
  // default SIGPIPE would kill this rank instead of failing the collective with a message
  // naming it (caught, not ignored: the programs this rank starts keep the default).
  survive_broken_pipes();
  const NewDescriptorsCloseOnExec close_on_exec;  // Gloo's sockets and epoll descriptor
  try {
    gloo::transport::tcp::attr attr;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
    } else {
      attr.hostname = options.hostname.empty() ? "127.0.0.1" : options.hostname;
    }
    auto transport = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    context->setTimeout(options.timeout);
    PrefixStore prefixed(prefix, store);
    GlooStoreAdapter adapter(prefixed, options.timeout);
    const auto start = std::chrono::steady_clock::now();
    context->connectFullMesh(adapter, transport);
    close_on_exec.mark();
    if (peers != nullptr) {
      StatusOr<GlooPeerRanks> exchanged = GlooPeerRanks::exchange(*context, prefixed, options.timeout);
      if (!exchanged.ok()) return exchanged.status().with_context(where + ": exchanging the pairs' addresses");
      *peers = std::move(*exchanged);
    }
    ZDP_LOG(kDebug) << "gloo: connected " << world_size << " ranks in "
                    << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s";
    return std::shared_ptr<gloo::Context>(context);
  } catch (const zdp::Error& e) {
    return e.status().with_context(where + " through the store failed");
  } catch (const std::exception& e) {
    return Status(StatusCode::kPeerFailure, where + ": connecting to the other ranks failed: " + e.what());
  }
}

}  // namespace zdp
