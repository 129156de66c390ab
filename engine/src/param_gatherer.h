// Parameters in the compute dtype: the buffer the trainer's views point into (stages
// 0-2: all parameters; stage 3: the owned shard, each layer group gathered into a lent
// buffer before use, prefetching the next groups in the pass's direction, and released
// after), and the per-bucket all-gathers that follow the optimizer at stages 1-2. A
// released group stays valid until its buffer is lent again or the parameters change,
// so backward finds the last forward layers still gathered. With overlap_param_gather
// each view orders the compute stream after its own buckets' all-gathers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/src/buffer_plan.h"
#include "engine/src/engine_env.h"
#include "engine/src/owned_range.h"
#include "engine/src/slot_pool.h"
#include "engine/src/timeline.h"

namespace zdp {

class QuantizedExchange;

class ParamGatherer {
 public:
  // Layer groups and per-bucket events for `layout`. No memory yet.
  static StatusOr<std::unique_ptr<ParamGatherer>> create(EngineEnv& env, const EngineOptions& options,
                                                         const Layout& layout, Timeline& timeline,
                                                         QuantizedExchange& quant);
  // The parameter buffer (all, or the shard at stage 3) and the gathered-layer pool.
  Status allocate(const BufferSizes& sizes);

  // Where the optimizer writes the updated parameters of owned range `o`: in the full
  // buffer (stages 0-2) or the shard (stage 3).
  void* owned(const OwnedRange& o);
  // Stages 1-2, after bucket b's update: its all-gather into the full buffer, on the
  // communication stream after the update.
  Status gather_bucket(int b, const OwnedRange& o);
  // The compute stream waits for every all-gather still pending. Errors name `where`.
  Status wait_all(const std::string& where);
  // Stage 3: the compute stream waits for the all-gathers of layer groups prefetched and
  // not yet entered (a scope opened between backward and step(), an evaluation's), which
  // read the shard: the optimizer's update of the shard must not race them.
  Status wait_prefetched(const std::string& where);
  // The parameters changed (a step, a load): stage-3 buffers no longer hold them.
  void invalidate();
  // After a load: the parameters from the fp32 masters (indexed like the optimizer
  // state), all-gathered at stages 1-2, as the end of step() leaves them; waits. With
  // optim.rounding = "stochastic" they are rounded as optimizer step `steps` rounded them
  // (its Philox key), so a resumed run computes with the bits the uninterrupted one had.
  Status restore_from_masters(const float* master, int64_t steps, const std::string& where);
  // Stage 3 with overlap_param_gather: gathers the first layer groups for the next forward.
  Status prefetch_after_step(int64_t steps);

  // The trainer's view of parameter p. Stage 3: only inside an open scope of its layer
  // group; nullptr (no failure) outside one, a prefetched group included. `label` names
  // it in errors.
  StatusOr<void*> view(int p, const std::string& label);
  // Stage 3: a scope of `layer` opens (gathers it if needed, waits, prefetches) / closes.
  Status enter(int layer, bool forward);
  void exit(int layer);
  // Layer scopes open now (the sum of their depths).
  int open_scopes() const;
  // The layer group of an open scope, or -1.
  int open_scope() const;

  // Adds the bytes of its buffers and pool to `measured` (by MemCategory).
  void count_memory(int64_t* measured) const;

 private:
  Status round_stochastic(const float* master, void* dst, int64_t count, uint64_t step, uint64_t first_index,
                          const std::string& where);
  ParamGatherer(EngineEnv& env, const EngineOptions& options, const Layout& layout, Timeline& timeline,
                QuantizedExchange& quant)
      : env_(env), opt_(options), layout_(layout), timeline_(timeline), quant_(quant) {}
  const Bucket& bucket(int b) const { return layout_.buckets()[static_cast<size_t>(b)]; }
  int index_of(int layer) const;  // in layer_ids_, or -1
  // A held buffer holding layer group `li` (issuing its all-gathers if none holds it);
  // `prefetch`: -1 rather than grow the pool.
  StatusOr<int> gather_layer(int li, bool prefetch);

  EngineEnv& env_;
  const EngineOptions& opt_;
  const Layout& layout_;
  Timeline& timeline_;
  QuantizedExchange& quant_;  // zero.gather_dtype int8: the all-gathers go through it
  DeviceBuffer full_;                             // stages 0-2: T x compute
  DeviceBuffer shard_;                            // stage 3: S x compute
  SlotPool gather_slots_;                         // stage 3: gathered layer groups
  std::vector<std::unique_ptr<Event>> gathered_;  // per bucket, on the comm stream after its all-gather
  std::vector<char> pending_;                     // per bucket: compute not yet ordered after it
  std::vector<int> layer_ids_;                    // distinct layer groups, ascending
  std::vector<int> scope_depth_;                  // per layer_ids_ index: open scopes
};

}  // namespace zdp
