// Bytes per rank by category for ZeRO stages 0-3 (docs/design.md, "Memory per rank"): the
// paper's formula, the "formula" column of Engine::memory() and MemoryPlan::formula.
// What the engine really allocates (padded sizes, gradient copies, staging buffers,
// workspace) is not modelled here but planned by plan_memory() (zdp/memory_plan.h), from
// the same rules the engine allocates with.
#pragma once

#include <cstdint>

#include "zdp/status.h"

namespace zdp {

// Master weights and AdamW moments are fp32 whatever the compute dtype.
inline constexpr int kMasterBytes = 4;

// Bytes per rank: the model states only (the formula has no buffers). Doubles because the
// formula has fractions (12 Psi / K). Device accounting categories in brackets.
struct ZeroMemory {
  double params = 0;        // compute-dtype parameters: all of them, or the owned shard at stage 3 [kParams]
  double grads = 0;         // compute-dtype gradients: all (stages 0-1) or the owned shard (2-3) [kGrads]
  double master = 0;        // fp32 master weights [kOptimizer]
  double m = 0;             // fp32 AdamW first moment or SGD momentum buffer [kOptimizer]
  double v = 0;             // fp32 AdamW second moment [kOptimizer]
  double total() const { return params + grads + master + m + v; }
};

// The ZeRO formula for psi parameters on world_size ranks at `stage`, with params and
// grads in a dtype of compute_bytes (2: bf16/fp16, 4: fp32), fp32 master weights and
// `moments` fp32 optimizer state tensors (optimizer_moments(): 2 = AdamW's m and v, as in
// the paper and below; 1 = SGD with momentum, m only; 0 = plain SGD). The 12 below is
// 4 (1 + moments):
//   stage 0: c Psi + c Psi + 12 Psi       stage 2: c Psi + (c + 12) Psi / K
//   stage 1: c Psi + c Psi + 12 Psi / K   stage 3: (2c + 12) Psi / K
// (c = 2 gives the table of docs/design.md: 16 Psi, 4 Psi + 12 Psi/K, 2 Psi + 14 Psi/K, 16 Psi/K.)
// kInvalidArgument names a bad argument.
StatusOr<ZeroMemory> zero_memory_formula(int64_t psi, int world_size, int stage, int compute_bytes, int moments = 2);

}  // namespace zdp
