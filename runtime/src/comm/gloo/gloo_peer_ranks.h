// Which rank a Gloo TCP error is about. Gloo's errors name the peer by the address of its
// end of the connection ("Connection closed by peer [10.0.0.7]:41235"), which nobody reading
// a rank's log can map to a rank: under torchrun or srun nothing else names the rank whose
// connection broke. Each pair's own address is public (its peer's is not, in the Gloo
// headers a distribution ships), so once the mesh is connected every rank publishes, for
// each pair, its end's two names (the connection's own address, which a peer that was
// connected to prints, and its listening address from its own rendezvous key, which a peer
// that connected to it prints: Gloo keeps the address the rendezvous gave it) and reads
// its peers' for its own pairs: one small store key a pair each way, O(world) per rank
// (Gloo's own rendezvous reads O(world^2) bytes a rank). With the connection's address
// alone a 3-rank kill test named no rank in 2 runs of 12; with both, in about 1 of 100
// Gloo still prints an address neither end published (not understood): best effort.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "zdp/status.h"
#include "zdp/store.h"

namespace gloo {
class Context;
}

namespace zdp {

class GlooPeerRanks {
 public:
  GlooPeerRanks() = default;
  // Collective over the ranks of `context` (connected, full mesh), through `store` (a
  // prefix of this context's own); waits up to `timeout` for each peer's key.
  static StatusOr<GlooPeerRanks> exchange(gloo::Context& context, Store& store, std::chrono::milliseconds timeout);
  // For tests: the peers' addresses as Gloo's errors print them, with their ranks.
  explicit GlooPeerRanks(std::vector<std::pair<std::string, int>> addresses) : addresses_(std::move(addresses)) {}

  // "rank 2" (or "ranks 1 and 2") for the peers whose address `gloo_error` contains; ""
  // when it names none of them.
  std::string ranks_named_in(const std::string& gloo_error) const;

 private:
  std::vector<std::pair<std::string, int>> addresses_;  // "[127.0.0.1]:41235", rank
};

}  // namespace zdp
