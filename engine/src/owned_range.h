// The range of the flat buffer a rank updates for bucket b (all of it at stage 0, its
// slice otherwise) and where that range sits in the optimizer state buffers: what the
// optimizer, the initial values and the checkpoints address.
#pragma once

#include <cstdint>

#include "engine/src/layout.h"
#include "zdp/engine.h"

namespace zdp {

struct OwnedRange {
  int64_t flat = 0;   // first element in the flat padded buffer
  int64_t count = 0;  // elements
  int64_t state = 0;  // first element in the rank's optimizer state (masters, moments)
};

inline OwnedRange owned_range(const Layout& layout, const EngineOptions& options, int rank, int b) {
  const Bucket& bk = layout.buckets()[static_cast<size_t>(b)];
  if (!options.zero.shards_optimizer()) return {bk.begin, bk.size, bk.begin};
  return {layout.slice_begin(b, rank), bk.slice_size(), layout.shard_offset(b)};
}

}  // namespace zdp
