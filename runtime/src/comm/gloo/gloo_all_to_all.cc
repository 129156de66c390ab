// All-to-all over Gloo unbound buffers (see the header for its cost).
#include "runtime/src/comm/gloo/gloo_all_to_all.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/src/comm/gloo/gloo_waits.h"

namespace zdp {
namespace {

// Our slot prefix (the ring reduce-scatter uses 0x41; Gloo's own collectives 0x01..0x08).
constexpr uint8_t kAllToAllSlotPrefix = 0x42;

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void gloo_all_to_all(const std::shared_ptr<gloo::Context>& context, const AllToAllArgs& args, int rank, int world) {
  const size_t n = args.chunk_bytes;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  if (n == 0) return;
  // Chunk q: where it is read and written, and how many of its bytes travel. The counts
  // are elements of element_bytes each.
  const bool shared = args.shape != nullptr && args.shape->send_shared;
  auto send_at = [&](int q) { return send + (shared ? 0 : static_cast<size_t>(q) * n); };
  auto size_of = [&](int q) -> size_t {
    if (args.shape == nullptr) return n;
    return static_cast<size_t>(args.shape->counts[static_cast<size_t>(q)]) * args.element_bytes;
  };
  if (size_of(rank) > 0) std::memcpy(recv + static_cast<size_t>(rank) * n, send_at(rank), size_of(rank));
  if (world == 1) return;

  const uint64_t slot = gloo::Slot::build(kAllToAllSlotPrefix, args.tag);
  const auto deadline = Clock::now() + args.timeout;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> out(static_cast<size_t>(world));
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> in(static_cast<size_t>(world));
  // Receives first, so no peer's send waits for a posted buffer; then sends, starting at
  // the next rank so that not every rank sends to rank 0 first. Empty chunks (a shape's
  // zero counts) are neither sent nor expected: the sizes are symmetric.
  for (int i = 1; i < world; ++i) {
    const int peer = (rank + world - i) % world;
    if (size_of(peer) == 0) continue;
    in[peer] = context->createUnboundBuffer(recv + static_cast<size_t>(peer) * n, size_of(peer));
    in[peer]->recv(peer, slot);
  }
  for (int i = 1; i < world; ++i) {
    const int peer = (rank + i) % world;
    if (size_of(peer) == 0) continue;
    out[peer] = context->createUnboundBuffer(const_cast<char*>(send_at(peer)), size_of(peer));
    out[peer]->send(peer, slot);
  }
  auto wait = [&](gloo::transport::UnboundBuffer& buffer, bool recv) {
    wait_on(args.waits, buffer, recv, remaining(deadline));
  };
  for (int peer = 0; peer < world; ++peer) {
    if (in[peer]) wait(*in[peer], true);
  }
  for (int peer = 0; peer < world; ++peer) {
    if (out[peer]) wait(*out[peer], false);
  }
}

}  // namespace zdp
