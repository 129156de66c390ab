// Bytes per rank by category for ZeRO stages 0-3 (DESIGN.md "Memory per rank"): the
// paper's formula, and what a concrete Layout needs (padded sizes, staging buffers), so
// the profiler can print "measured vs formula; the gap is padding and buckets".
#pragma once

#include <cstdint>
#include <string>

#include "layout.h"
#include "zdp/status.h"

namespace zdp {

// Master weights and AdamW moments are fp32 whatever the compute dtype.
inline constexpr int kMasterBytes = 4;

// Bytes per rank. Doubles because the formula has fractions (12 Psi / K); the layout
// numbers are whole. Device accounting categories in brackets.
struct ZeroMemory {
  double params = 0;        // compute-dtype parameters: all of them, or the owned shard at stage 3 [kParams]
  double grads = 0;         // compute-dtype gradients: all (stages 0-1) or the owned shard (2-3) [kGrads]
  double master = 0;        // fp32 master weights [kOptimizer]
  double m = 0;             // fp32 AdamW first moment [kOptimizer]
  double v = 0;             // fp32 AdamW second moment [kOptimizer]
  double grad_staging = 0;  // stages 2-3: one bucket-sized gradient buffer that backward fills
                            // and reduce-scatter drains [kBuckets]
  double param_gather = 0;  // stage 3: the gathered layer groups, the one in use plus the
                            // prefetched ones [kBuckets]
  double total() const { return params + grads + master + m + v + grad_staging + param_gather; }
};

// The ZeRO formula for psi parameters on world_size ranks at `stage`, with params and
// grads in a dtype of compute_bytes (2: bf16/fp16, 4: fp32) and fp32 master/m/v:
//   stage 0: c Psi + c Psi + 12 Psi       stage 2: c Psi + (c + 12) Psi / K
//   stage 1: c Psi + c Psi + 12 Psi / K   stage 3: (2c + 12) Psi / K
// (c = 2 gives the DESIGN.md table: 16 Psi, 4 Psi + 12 Psi/K, 2 Psi + 14 Psi/K, 16 Psi/K.)
// The formula has no staging buffers. kInvalidArgument names a bad argument.
StatusOr<ZeroMemory> zero_memory_formula(int64_t psi, int world_size, int stage, int compute_bytes);

// What `layout` needs per rank at `stage`: the same categories over padded sizes
// (total_elems where the formula has Psi, shard_elems where it has Psi/K), plus one
// bucket-sized gradient staging buffer (largest bucket) at stages 2-3 and, at stage 3,
// gather buffers for 1 + prefetch_layers consecutive layer groups (the largest such run).
// Stage 3 needs a layout cut at layer groups (BucketBoundary::kLayerGroups).
StatusOr<ZeroMemory> zero_memory_of_layout(const Layout& layout, int stage, int compute_bytes, int prefetch_layers = 0);

// Table for logs: one row per category and the total, formula vs layout and the gap.
std::string describe_zero_memory(const ZeroMemory& formula, const ZeroMemory& layout);

}  // namespace zdp
