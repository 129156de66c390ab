// Reduce-scatter with equal slices, built on Gloo's point-to-point primitives.
//
// Why: this Gloo version has no new-style reduce-scatter (only the old
// ReduceScatterHalvingDoubling algorithm class, which binds its buffers at construction
// and so cannot serve a stream of collectives over changing buckets).
//
// What it costs: a ring of K ranks, K-1 steps. Each rank sends and receives
// (K-1)/K * N bytes (N = the whole input), the bandwidth-optimal volume, and performs
// (K-1) slice reductions. Each slice is cut into two segments (1-16 MiB) and the ring is
// pipelined: a segment is reduced and forwarded while the next one is still arriving,
// and receives run up to one step ahead. Scratch: two slices, owned by the caller and
// reused across calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/src/comm/host_reduce.h"

namespace gloo {
class Context;
}

namespace zdp {

class GlooWaits;

struct RingReduceScatterArgs {
  const void* send = nullptr;  // K slices of slice_bytes each
  void* recv = nullptr;        // this rank's reduced slice (may alias its input slice)
  size_t slice_bytes = 0;
  size_t element_size = 1;
  HostReduceFn reduce = nullptr;
  uint32_t tag = 0;  // distinguishes concurrent collectives on one context
  std::chrono::milliseconds timeout{0};  // end to end
  GlooWaits* waits = nullptr;            // the communicator's, so that abort() ends them; or null
};

// Throws gloo::IoException (timeout, dead peer) like every Gloo collective.
// `scratch` grows to 2 * slice_bytes when needed.
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& context, const RingReduceScatterArgs& args,
                         std::unique_ptr<char[]>& scratch, size_t& scratch_bytes);

}  // namespace zdp
