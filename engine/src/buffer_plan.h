// The engine's memory rules, written once: how it cuts its layout, and the size of every
// buffer finalize() allocates on a rank (each part's allocate()), from the layout,
// the options and the device kind alone. allocate() takes its sizes from plan_buffers();
// plan_memory() (zdp/memory_plan.h, what `dp-launch plan` prints) and Engine::memory()'s
// "planned" column report the same plan (memory_plan_of_layout), so the three cannot drift.
// engine.h's "Memory per stage" describes these rules in words.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/src/layout.h"
#include "zdp/device.h"
#include "zdp/engine.h"
#include "zdp/memory_plan.h"

namespace zdp {

// Slices are multiples of 32 elements: 64 bytes or more in every dtype, so every slice of
// every buffer starts on a cache line and suits the kernels' 16-byte vector loads.
inline constexpr int64_t kAlignElems = 32;

// How the engine cuts its layout (the planner builds the same one).
LayoutOptions engine_layout_options(const EngineOptions& options, int world_size);

// Deterministic mode reduces every micro-batch as it completes, whatever the accumulation
// mode (docs/design.md "Deterministic mode"), so it never accumulates locally.
// Whether micro-batches are reduce-scattered one by one into an fp32 gradient shard
// (EngineOptions::accumulate kSharded at stages 2-3 with accum_steps > 1) instead of being
// accumulated in a full-size fp32 buffer and reduced once.
inline bool shards_accumulation(const EngineOptions& options) {
  return options.zero.accumulate == GradAccumulation::kSharded && options.zero.shards_grads() &&
         options.accum_steps > 1;
}

// Whether local accumulation (accum_steps > 1, not sharded, not deterministic) keeps its
// fp32 sums in the reduce copy itself: stages 0-1 with an fp32 reduce dtype and a 16-bit
// compute dtype, where that copy is fp32 and whole, and nothing reads it between the
// optimizer and the next step's first fold (stream order): the last micro-batch folds in
// place, and the separate accumulation buffer (4 bytes an element: 475 MiB for gpt2-124m)
// is not allocated.
bool accumulates_in_reduce_copy(const EngineOptions& options);

// fp32 state tensors the optimizer keeps per owned element besides the master weights:
// 2 for AdamW (m, v), 1 for SGD with momentum (its buffer, in m), 0 for plain SGD. Only
// these are allocated, checkpointed and counted by the ZeRO formula.
int optimizer_moments(const OptimConfig& optim);

// Whether bucket b shares a gradient group with bucket b - 1 (a parameter straddles them):
// gradient views are contiguous, so stages 2-3 stage such buckets together.
bool joins_previous_bucket(const Layout& layout, int b);

// Padded elements of each layer group (the buckets holding it; at stage 3 they hold
// nothing else), in layout order.
std::vector<int64_t> layer_group_elems(const Layout& layout);

// `count` equal buffers of `slot_bytes` (a SlotPool).
struct SlotSizes {
  int64_t slot_bytes = 0;
  int count = 0;
  int64_t bytes() const { return slot_bytes * count; }
};

// Bytes of each buffer allocate() allocates; 0 (or count 0) = not allocated. The
// MemCategory it is accounted under in brackets; MemoryPlan's fields of the same names
// are these numbers.
struct BufferSizes {
  int64_t params = 0;        // [params] compute dtype: all (stages 0-2) or the owned shard (3)
  int64_t grads = 0;         // [grads] compute dtype, all (0-1); reduce dtype, owned shard (2-3;
                             // fp32 when shards_accumulation: the shard is the accumulation)
  int64_t reduce_copy = 0;   // [grads] stages 0-1, reduce dtype != compute dtype: the full copy
  int64_t accum = 0;         // [grads] accum_steps > 1, accumulated locally: fp32, all elements
                             // (none when accumulates_in_reduce_copy)
  int64_t master = 0;        // [optimizer] fp32 master weights: all (stage 0) or the shard
  int64_t m = 0;             // [optimizer] AdamW's first moment or SGD's momentum buffer (fp32)
  int64_t v = 0;             // [optimizer] AdamW's second moment (fp32)
  int64_t grad_stats = 0;    // [workspace] one kernels::GradStats per bucket
  int64_t norm_scratch = 0;  // [workspace] CUDA only: grad_check's scratch for the largest slice
  SlotSizes grad_staging;    // [buckets] stages 2-3: the trainer's gradients, per gradient group
  SlotSizes reduce_staging;  // [buckets] stages 2-3, cast or local accumulation before the reduction
  SlotSizes param_gather;    // [buckets] stage 3: gathered layer groups
  int64_t ordered_gather = 0;    // [buckets] deterministic: world x the largest bucket, compute dtype
  int64_t ordered_partials = 0;  // [buckets] deterministic: OrderedSum::max_depth(world x accum)
                                 // fp32 entries of T (stage 0) or S elements
  int64_t error_feedback = 0;  // [grads] quantized reduce_dtype with error feedback: fp32, all elements
  SlotSizes reduce_wire;     // [buckets] quantized reduce_dtype: send + receive chunks of a bucket
  SlotSizes gather_wire;     // [buckets] quantized gather_dtype: own chunk + the received ones
  // Not sized here: the CUDA decay table (a few bytes per run of same-decay parameters; it
  // depends on the optimizer's parameter groups, not on the layout).
};

// Bytes of one rank's quantized chunk of a `slice`-element slice (kernels/quantize.h),
// rounded to fp32 words: the all-to-all and all-gather move them as fp32 elements.
int64_t wire_chunk_bytes(int64_t slice, WireQuant quant);
// The distance between two peers' chunks in a reduction's wire buffer: the quantized
// chunk, or with zero.compress = "inter-node" room for the fp32 slice too (same-node
// peers get it unquantized), a multiple of 16 bytes.
int64_t wire_stride_bytes(int64_t slice, WireQuant quant, CompressScope compress);

// What `options` cannot do with `layout` that validate() cannot see without it (the
// deterministic norm's element limit): finalize() and plan_memory() refuse the same.
Status check_layout_for_options(const Layout& layout, const EngineOptions& options);

// REQUIRES: `layout` made with engine_layout_options(options, world size) and options valid.
BufferSizes plan_buffers(const Layout& layout, const EngineOptions& options, DeviceKind device);

// plan_buffers() of `layout` as a MemoryPlan (with the layout's sizes and the ZeRO formula).
// REQUIRES: as plan_buffers().
StatusOr<MemoryPlan> memory_plan_of_layout(const Layout& layout, const EngineOptions& options, DeviceKind device);

}  // namespace zdp
