// What Engine::finalize() will allocate on each rank, computed before any rank exists:
// the memory half of `dp-launch plan`. plan_memory() builds the Layout exactly as the
// engine does (same bucket size, alignment and boundaries, so the same padding) and sizes
// every buffer with the very function the engine's allocation takes its sizes from
// (engine/src/buffer_plan.cc; docs/design.md "Memory per rank" says the rules in
// words). Engine::memory()'s "planned" column and the table finalize() logs are this plan
// for the engine's own layout; tests/multiproc/memory_plan_test.cc checks that it equals
// the "measured" column (device accounting) byte for byte for the reference models,
// K = 1, 2, 4 and stages 0-3.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zdp/device.h"
#include "zdp/engine.h"
#include "zdp/status.h"

namespace zdp {

// One parameter as a model declares it to Engine::add_param, without an engine.
struct ParamDecl {
  std::string name;
  std::vector<int64_t> shape;
  int layer = 0;  // layer group
  int64_t numel() const;  // INT64_MAX when the product overflows int64 (no layout accepts it)
};

// Bytes per rank, by buffer; the MemCategory each is accounted under in brackets.
struct MemoryPlan {
  int stage = 0;
  int world_size = 1;
  int64_t psi = 0;           // parameters (elements of all of them)
  int64_t padded_elems = 0;  // the flat buffer, bucket padding included
  int64_t shard_elems = 0;   // one rank's slices (padded_elems / world_size)
  std::vector<int64_t> bucket_elems;  // each bucket's padded size, in layout order
  // Each bucket's first and last parameter with elements in it (registration indices,
  // inclusive), in layout order: a bucket is reduced once all of them have their gradient.
  std::vector<std::pair<int, int>> bucket_params;
  std::vector<int64_t> group_elems;   // stage 3: each layer group's padded size (its buckets), in order
  int gather_slots = 0;               // stage 3: gathered layer groups held at once (buffers.param_gather's)
  int64_t formula = 0;       // docs/design.md's ZeRO formula for psi (model states; no padding or buffers)

  // Bytes of the model states: what the ZeRO formula counts (with the layout's padding).
  struct States {
    int64_t params = 0;       // [params] compute dtype: all (stages 0-2) or the owned shard (3)
    int64_t grads = 0;        // [grads] compute dtype, all (0-1); reduce dtype, owned shard (2-3)
    int64_t reduce_copy = 0;  // [grads] stages 0-1 with reduce dtype != compute dtype: a full copy
    int64_t accum = 0;        // [grads] accum_steps > 1: the fp32 accumulation of micro-batches
    int64_t master = 0;       // [optimizer] fp32 master weights: all (stage 0) or the shard
    int64_t m = 0;            // [optimizer] first moment (fp32)
    int64_t v = 0;            // [optimizer] second moment (fp32)
    int64_t error_feedback = 0;  // [grads] reduce_dtype int8/int4 with error feedback: fp32, all elements
    int64_t total() const { return params + grads + reduce_copy + accum + master + m + v + error_feedback; }
  } states;
  // Bytes of the staging buffers and the workspace, which the formula does not count.
  struct Buffers {
    int64_t grad_staging = 0;    // [buckets] stages 2-3: 2 buffers of the largest gradient group
                                 // (overlap off: one per group)
    int64_t reduce_staging = 0;  // [buckets] stages 2-3, reduce dtype != compute or accum > 1: 2 buckets
    int64_t param_gather = 0;    // [buckets] stage 3: gather_slots gathered layer groups
    int64_t ordered = 0;         // [buckets] deterministic mode: world x the largest bucket
                                 // (compute dtype) and the ordered sum's fp32 partials
    int64_t wire = 0;            // [buckets] quantized reduce_dtype / gather_dtype: 2 buffers of a
                                 // bucket's chunks per direction
    int64_t workspace = 0;       // [workspace] per-bucket gradient statistics; on CUDA also the
                                 // norm scratch (the optimizer's decay table, a few bytes per
                                 // run of same-decay parameters, is not planned)
    int64_t total() const { return grad_staging + reduce_staging + param_gather + ordered + wire + workspace; }
  } buffers;

  int64_t bytes(MemCategory category) const;
  // params + grads + optimizer + buckets + workspace: states.total() + buffers.total().
  int64_t total() const { return states.total() + buffers.total(); }
};

// The plan of `params` (in registration order) under `options` on `world_size` ranks of
// `device`. kInvalidArgument for options finalize() would refuse (EngineOptions::validate)
// or parameters it would refuse (empty or duplicate names, decreasing layer groups).
StatusOr<MemoryPlan> plan_memory(const std::vector<ParamDecl>& params, const EngineOptions& options, int world_size,
                                 DeviceKind device);

}  // namespace zdp
