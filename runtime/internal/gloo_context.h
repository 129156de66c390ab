// Creating a connected Gloo context through a zdp::Store: shared by the Gloo
// communicator and the benchmark that compares it with raw Gloo.
#pragma once

#include <memory>
#include <string>

#include "zdp/comm.h"
#include "zdp/store.h"

namespace gloo {
class Context;
}

namespace zdp {

class GlooPeerRanks;

// Connects `world_size` ranks into a full mesh over TCP (options.iface, else
// options.hostname, else 127.0.0.1), exchanging addresses under `prefix` in `store`.
// Errors name the address this rank advertised. With `peers`, also learns which rank each
// peer address is (runtime/src/comm/gloo/gloo_peer_ranks.h; every rank must ask alike).
// Create it after fork(): Gloo's device threads do not survive a fork.
StatusOr<std::shared_ptr<gloo::Context>> connect_gloo_context(Store& store, const std::string& prefix, int rank,
                                                               int world_size, const CommOptions& options,
                                                               GlooPeerRanks* peers = nullptr);

}  // namespace zdp
