// Gradients: the buffers the trainer writes (stages 0-1: one full buffer; stages 2-3:
// staging buffers lent per gradient group for one micro-batch), readiness counting per
// bucket, accumulation over micro-batches, and each bucket's reduction on the
// communication stream as soon as the layout's backward order allows. Local accumulation
// folds every micro-batch but the last into a full fp32 buffer and reduces once; sharded
// accumulation (stages 2-3) reduce-scatters every micro-batch and adds the slice into the
// fp32 gradient shard. Deterministic mode (EngineOptions::deterministic) gathers every
// micro-batch's buckets to their owners and sums them there in the canonical order of
// OrderedSum (grad_reducer_ordered.cc), whatever the accumulation mode. What step() reads:
// the reduced gradient of every owned range.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/src/buffer_plan.h"
#include "engine/src/engine_env.h"
#include "engine/src/ordered_sum.h"
#include "engine/src/slot_pool.h"
#include "engine/src/timeline.h"

namespace zdp {

class ParamRegistry;
class QuantizedExchange;

class GradReducer {
 public:
  // Buckets, gradient groups and their events for `layout`. No memory yet.
  static StatusOr<std::unique_ptr<GradReducer>> create(EngineEnv& env, const EngineOptions& options,
                                                       const Layout& layout, const ParamRegistry& registry,
                                                       Timeline& timeline, QuantizedExchange& quant);
  // The gradient buffers, the accumulation and the staging pools (plan_buffers()).
  Status allocate(const BufferSizes& sizes);

  // The trainer's gradient view of parameter p for this micro-batch (stages 2-3: lends
  // its group a staging buffer on first use). `step` (the one being computed) names it
  // in errors.
  StatusOr<void*> view(int p, int64_t step);
  // Parameter p's gradient of this micro-batch is complete: folds it (local accumulation
  // before the last micro-batch) or counts it towards its buckets' reductions, launching
  // those now complete when overlapping. Misuse is kInvalidArgument; a failed fold or
  // launch also breaks the engine (env.failure).
  Status mark_ready(int p, int64_t step);
  // Issues every reduction not yet issued (overlap off: step() calls it).
  Status launch_ready(int64_t step);
  // The compute stream waits for every bucket's reduction. Errors name `where`.
  Status wait_all(const std::string& where);

  int64_t micro() const { return micro_.index; }          // complete micro-batches of this step
  int ready_count() const { return micro_.ready_count; }  // parameters ready in the current one
  // Up to ~200 characters of the parameters not marked ready in the current micro-batch.
  std::string missing() const;
  // A new step: no micro-batch done, nothing ready, nothing reduced.
  void reset_step();

  // The dtype of reduced(): the reduce dtype, or fp32 when the shard accumulates.
  DType reduced_dtype() const;
  // The reduced gradient of owned range (flat, state): stages 0-1 in the full buffer at
  // `flat`, stages 2-3 in the owned shard at `state`.
  void* reduced(int64_t flat, int64_t state);
  // This rank's reduced slice of bucket b.
  void* reduced_slice(int b);

  // Adds the bytes of its buffers and pools to `measured` (by MemCategory).
  void count_memory(int64_t* measured) const;

 private:
  // One bucket's progress through the current micro-batch's reduction.
  struct BucketState {
    int params = 0;                  // parameters with elements in it
    int pending = 0;                 // of those, not yet ready in the micro-batch being reduced
    int group = 0;                   // its gradient group
    std::unique_ptr<Event> reduced;  // on the comm stream, after its gradient reduction
  };
  // Buckets connected by parameters that straddle them: a parameter's gradient view must
  // be contiguous, so stages 2-3 stage gradients per group (at stage 3 groups never cross
  // a layer group, because buckets do not).
  struct GradGroup {
    int first_bucket = 0;
    int last_bucket = 0;  // inclusive
    int64_t begin = 0;    // flat offset of its first bucket
    int64_t size = 0;     // padded elements
    int slot = -1;       // mem_.grad_slots slot lent for this micro-batch, or -1
    // Buckets of this micro-batch not yet handed off: folded into the local accumulation
    // (before the last micro-batch) or their reduction issued (micro-batches that reduce).
    int unhanded = 0;
  };

  GradReducer(EngineEnv& env, const EngineOptions& options, const Layout& layout, const ParamRegistry& registry,
              Timeline& timeline, QuantizedExchange& quant)
      : env_(env), opt_(options), layout_(layout), registry_(registry), timeline_(timeline), quant_(quant) {}
  const Bucket& bucket(int b) const { return layout_.buckets()[static_cast<size_t>(b)]; }
  bool last_micro() const { return micro_.index == opt_.accum_steps - 1; }
  bool sharded_accum() const { return shards_accumulation(opt_); }
  // Whether every micro-batch is reduced as it completes (else all but the last are folded
  // locally): sharded accumulation and deterministic mode.
  bool reduces_every_micro() const { return sharded_accum() || opt_.deterministic; }
  void* in_bucket(int b);  // the trainer's gradient of bucket b (compute dtype)
  // Local accumulation before the last micro-batch: bucket b's gradient, padding included,
  // added into (the first micro-batch: copied to) the fp32 accumulation.
  Status fold_bucket(int b);
  // Where local accumulation keeps the fp32 sum of flat element `flat`: its own buffer, or
  // the reduce copy (accumulates_in_reduce_copy).
  float* accum_at(int64_t flat);
  Status launch(int b);
  // Bucket b's all-reduce (stage 0) or reduce-scatter of `send` in the reduce dtype.
  Status reduce_full_precision(int b, void* send);
  // Deterministic mode's reduction of bucket b's micro-batch (grad_reducer_ordered.cc).
  Status launch_ordered(int b);
  void reset_reductions();  // every bucket unreduced again (a new micro-batch to reduce)

  EngineEnv& env_;
  const EngineOptions& opt_;
  const Layout& layout_;
  const ParamRegistry& registry_;
  Timeline& timeline_;
  QuantizedExchange& quant_;  // zero.reduce_dtype int8 / int4: the exchange that replaces the reduce-scatter
  std::vector<BucketState> buckets_;
  std::vector<GradGroup> groups_;
  std::vector<int> group_of_param_;
  // Buckets in layout.backward_bucket_order(); `next` is the next one to reduce.
  struct {
    std::vector<int> order;
    size_t next = 0;
  } launch_;
  // The micro-batch in progress: its index in the step and the parameters marked ready.
  struct {
    int64_t index = 0;
    std::vector<char> ready;   // per parameter
    std::vector<char> viewed;  // per parameter: grad() called in this micro-batch (grad_ready checks it)
    int ready_count = 0;
  } micro_;
  // The gradient memory (plan_buffers()).
  struct {
    DeviceBuffer full;         // stages 0-1: T x compute, written by the trainer
    DeviceBuffer reduce_full;  // stages 0-1, reduce dtype != compute dtype: T x reduce
    DeviceBuffer shard;        // stages 2-3: S x reduce, the reduce-scatter output (S x fp32,
                               // the accumulation, when shards_accumulation)
    DeviceBuffer accum;        // accum_steps > 1, local accumulation: T x fp32 (none when it
                               // lives in reduce_full: accumulates_in_reduce_copy)
    SlotPool grad_slots;       // stages 2-3: the trainer's gradient views, per group
    SlotPool reduce_slots;     // stages 2-3 when a cast or accumulation precedes the reduction
    DeviceBuffer gathered;     // deterministic: every rank's gradient of one bucket (compute dtype)
    DeviceBuffer partials;     // deterministic: the OrderedSum stack, entries of T (stage 0) or S fp32
  } mem_;
  // Deterministic mode: the canonical sum's progress and this micro-batch's operations
  // (the same for every bucket), and whether the trainer's full gradient buffer (stages
  // 0-1) is still being sent when the next micro-batch asks for it.
  struct {
    OrderedSum sum{1};
    int64_t ops_micro = -1;  // the micro-batch `ops` belong to
    std::vector<OrderedSum::Op> ops;
    bool full_in_flight = false;
  } ordered_;
};

}  // namespace zdp
