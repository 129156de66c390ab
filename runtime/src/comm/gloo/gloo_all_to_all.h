// All-to-all with equal chunks, built on Gloo's point-to-point primitives (this Gloo's
// alltoall binds no tag per call and is not used elsewhere here, so the exchange follows
// the ring reduce-scatter's pattern: unbound buffers, one slot per collective).
//
// What it costs: every rank sends its K - 1 peer chunks and receives K - 1, all posted at
// once ((K-1)/K of the input, the same volume as a reduce-scatter, but each value crosses
// the network exactly once, unreduced: what a quantized exchange needs so that values are
// quantized once, not at every ring hop).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "zdp/comm.h"

namespace gloo {
class Context;
}

namespace zdp {

class GlooWaits;

struct AllToAllArgs {
  const void* send = nullptr;  // K chunks of chunk_bytes, chunk q for rank q (one, with shape->send_shared)
  void* recv = nullptr;        // K chunks, chunk q from rank q; must not overlap send
  size_t chunk_bytes = 0;
  const AllToAllShape* shape = nullptr;  // per-peer sizes in elements, or null
  size_t element_bytes = 1;              // of the shape's elements
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{0};  // end to end
  GlooWaits* waits = nullptr;            // the communicator's, so that abort() ends them; or null
};

// Throws gloo::IoException (timeout, dead peer) like every Gloo collective. `context` may
// be null for a world of 1 (only the own chunk is copied).
void gloo_all_to_all(const std::shared_ptr<gloo::Context>& context, const AllToAllArgs& args, int rank, int world);

}  // namespace zdp
