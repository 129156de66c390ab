// GlooPeerRanks (gloo_peer_ranks.h): the pairs' addresses exchanged once the mesh is connected.
#include "runtime/src/comm/gloo/gloo_peer_ranks.h"

#include <gloo/context.h>
#include <gloo/transport/pair.h>

namespace zdp {
namespace {

// The key rank `from` publishes its end of the pair with rank `to` under.
std::string key_of(int from, int to) { return "peer-address/" + std::to_string(from) + "/" + std::to_string(to); }

// `address` occurs in `text` as a whole ("[10.0.0.1]:4123" is not "[10.0.0.1]:41235").
bool contains_address(const std::string& text, const std::string& address) {
  for (size_t at = text.find(address); at != std::string::npos; at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || text[end] < '0' || text[end] > '9') return true;
  }
  return false;
}

}  // namespace

StatusOr<GlooPeerRanks> GlooPeerRanks::exchange(gloo::Context& context, Store& store,
                                                std::chrono::milliseconds timeout) {
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    ZDP_RETURN_IF_ERROR(store.set(key_of(context.rank, peer), context.getPair(peer)->address().str()));
  }
  std::vector<std::pair<std::string, int>> addresses;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    ZDP_ASSIGN_OR_RETURN(std::string address, store.get(key_of(peer, context.rank), timeout));
    addresses.emplace_back(std::move(address), peer);
  }
  return GlooPeerRanks(std::move(addresses));
}

std::string GlooPeerRanks::ranks_named_in(const std::string& gloo_error) const {
  std::vector<int> ranks;
  for (const auto& [address, rank] : addresses_) {
    if (!address.empty() && contains_address(gloo_error, address)) ranks.push_back(rank);
  }
  if (ranks.empty()) return "";
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace zdp
