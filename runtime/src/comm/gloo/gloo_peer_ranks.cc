// GlooPeerRanks (gloo_peer_ranks.h): the pairs' addresses exchanged once the mesh is connected.
#include "runtime/src/comm/gloo/gloo_peer_ranks.h"

#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>

namespace zdp {
namespace {

// The key rank `from` publishes its end of the pair with rank `to` under.
std::string key_of(int from, int to) { return "peer-address/" + std::to_string(from) + "/" + std::to_string(to); }

// The handshake's slot prefix (the ring reduce-scatter uses 0x41, the all-to-all 0x42,
// Gloo's own collectives 0x01..0x08).
constexpr uint8_t kHandshakeSlotPrefix = 0x43;

// A byte each way over every pair: both ends have then handled their connection, so a
// pair's address() is its connection's, not the one it had before connecting (Gloo resets
// both addresses when its loop handles the connection).
// Throws gloo::IoException on a timeout or a dead peer, as the rendezvous does.
void touch_every_pair(gloo::Context& context, std::chrono::milliseconds timeout) {
  const int k = context.size, me = context.rank;
  const uint64_t slot = gloo::Slot::build(kHandshakeSlotPrefix, 0);
  std::vector<char> in(static_cast<size_t>(k)), out(static_cast<size_t>(k), 1);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(static_cast<size_t>(k)), sends(static_cast<size_t>(k));
  for (int p = 0; p < k; ++p) {
    if (p == me) continue;
    recvs[static_cast<size_t>(p)] = context.createUnboundBuffer(&in[static_cast<size_t>(p)], 1);
    recvs[static_cast<size_t>(p)]->recv(p, slot);
  }
  for (int p = 0; p < k; ++p) {
    if (p == me) continue;
    sends[static_cast<size_t>(p)] = context.createUnboundBuffer(&out[static_cast<size_t>(p)], 1);
    sends[static_cast<size_t>(p)]->send(p, slot);
  }
  for (auto& r : recvs) {
    if (r) r->waitRecv(timeout);
  }
  for (auto& s : sends) {
    if (s) s->waitSend(timeout);
  }
}

// This rank's listening address as Gloo's rendezvous published it: its key "<rank>" holds
// the address of each of its pairs (the device's listener and a sequence number), all of
// one size. Read back and decoded by Gloo's own Address; "" where that layout is not
// this Gloo's (the names then come from the connections alone).
std::string listening_address(gloo::Context& context, Store& store) {
  if (context.size < 2) return "";
  // Our own key, written before connecting: there at once (a short wait where it is not).
  StatusOr<std::string> all = store.get(std::to_string(context.rank), std::chrono::milliseconds(200));
  const size_t peers = static_cast<size_t>(context.size - 1);
  if (!all.ok() || all->empty() || all->size() % peers != 0) return "";
  try {
    const std::vector<char> first(all->begin(), all->begin() + static_cast<std::ptrdiff_t>(all->size() / peers));
    return gloo::transport::tcp::Address(first).str();
  } catch (const std::exception&) {
    return "";
  }
}

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
  // Two names for this rank's end of each pair: the connection's own address, which the
  // peer's errors print where it connected to us, and this rank's listening address, which
  // they print where we connected to it (Gloo keeps the address the rendezvous gave it).
  touch_every_pair(context, timeout);
  const std::string listening = listening_address(context, store);
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    ZDP_RETURN_IF_ERROR(
        store.set(key_of(context.rank, peer), context.getPair(peer)->address().str() + "\n" + listening));
  }
  std::vector<std::pair<std::string, int>> addresses;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    ZDP_ASSIGN_OR_RETURN(const std::string names, store.get(key_of(peer, context.rank), timeout));
    const size_t cut = names.find('\n');
    addresses.emplace_back(names.substr(0, cut), peer);
    if (cut != std::string::npos && cut + 1 < names.size()) addresses.emplace_back(names.substr(cut + 1), peer);
  }
  return GlooPeerRanks(std::move(addresses));
}

std::string GlooPeerRanks::ranks_named_in(const std::string& gloo_error) const {
  std::vector<int> ranks;
  for (const auto& [address, rank] : addresses_) {
    // A rank has two names (its listener is also its accepted connections' address): once.
    if (address.empty() || !contains_address(gloo_error, address)) continue;
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) ranks.push_back(rank);
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
