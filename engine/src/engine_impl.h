// Internal state of zdp::Engine, shared by the engine*.cc files, one concern each:
// engine.cc (API, options, lifecycle), engine_init.cc (registration check, initial
// values, broadcast, hash check), engine_buffers.cc (layout and allocation per stage),
// engine_grads.cc (gradient views, readiness, accumulation, reductions), engine_step.cc
// (norm, clipping, loss scale, optimizer, all-gather), engine_stage3.cc (layer groups),
// engine_memory.cc (the memory report); the layout and buffer-size rules are
// engine_buffer_plan.h's, shared with plan_memory().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/buffer_plan.h"
#include "engine/src/exec.h"
#include "engine/src/slot_pool.h"
#include "engine/src/layout.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "zdp/engine.h"

namespace zdp {

inline void* elem_ptr(void* base, int64_t elems, DType dtype) {
  return static_cast<char*>(base) + elems * static_cast<int64_t>(dtype_size(dtype));
}
inline float* elem_ptr(float* base, int64_t elems) { return base + elems; }

// The config's batch-size rule as optim/ names it.
optim::LrScaling lr_scaling_of(LrScalingRule rule);

struct Registration {
  ParamSpec spec;
  Init init;
  Decay decay = Decay::kByName;
};

// One bucket's progress through the current step.
struct BucketState {
  int params = 0;       // parameters with elements in it
  int pending = 0;      // of those, not yet ready in the micro-batch being reduced
  bool launched = false;
  bool gather_pending = false;  // compute not yet ordered after its parameter all-gather
  int group = 0;                // its gradient group
  std::unique_ptr<Event> reduced;   // on the comm stream, after its gradient reduction
  std::unique_ptr<Event> gathered;  // on the comm stream, after its parameter all-gather
};

// Buckets connected by parameters that straddle them: a parameter's gradient view must be
// contiguous, so stages 2-3 stage gradients per group (at stage 3 groups never cross a
// layer group, because buckets do not).
struct GradGroup {
  int first_bucket = 0;
  int last_bucket = 0;  // inclusive
  int64_t begin = 0;    // flat offset of its first bucket
  int64_t size = 0;     // padded elements
  int params = 0;
  int slot = -1;        // grad_slots slot lent for this micro-batch, or -1
  int unfolded = 0;     // local accumulation, before the last micro-batch: parameters not yet accumulated
  int unlaunched = 0;   // micro-batches that reduce: buckets whose reduction is not yet issued
};

// The range of the flat buffer a rank updates for bucket b (all of it at stage 0, its
// slice otherwise) and where that range sits in the optimizer state buffers.
struct OwnedRange {
  int64_t flat = 0;
  int64_t count = 0;
  int64_t state = 0;
};

struct Engine::Impl {
  Impl(Context& context, EngineOptions options);

  // ---- identity and configuration
  Context& ctx;
  Device& device;
  Communicator& comm;
  const int rank;
  const int world;
  EngineOptions opt;
  std::string who;  // "rank 3"
  std::chrono::milliseconds timeout;
  int instance = 0;  // per-process engine count: store keys of this engine

  std::vector<Registration> registered;
  bool finalized = false;
  Status failure;  // sticky: a failed param()/grad(), or a failure that broke the state

  Layout layout;
  std::optional<optim::Optimizer> optimizer;
  std::optional<optim::DynamicLossScale> scaler;  // fp16 only
  std::unique_ptr<Exec> exec;

  // ---- buffers (see engine.h for what each stage keeps)
  DeviceBuffer params_full;   // stages 0-2: T x compute
  DeviceBuffer params_shard;  // stage 3: S x compute
  DeviceBuffer grads_full;    // stages 0-1: T x compute, written by the trainer
  DeviceBuffer reduce_full;   // stages 0-1, reduce dtype != compute dtype: T x reduce
  DeviceBuffer grads_shard;   // stages 2-3: S x reduce, the reduce-scatter output (S x fp32, the
                              // accumulation, when sharded_accum())
  DeviceBuffer accum;         // accum_steps > 1, local accumulation: T x fp32
  DeviceBuffer master, exp_avg, exp_avg_sq;  // fp32: T (stage 0) or S
  DeviceBuffer stats;         // one kernels::GradStats per bucket
  DeviceBuffer check_workspace;  // CUDA grad_check scratch
  DeviceBuffer decay_table;      // CUDA copy of the optimizer's decay segments
  SlotPool grad_slots;    // stages 2-3: the trainer's gradient views, per group
  SlotPool reduce_slots;  // stages 2-3 when a cast or accumulation precedes the reduction
  SlotPool gather_slots;  // stage 3: gathered layer groups

  // ---- per-step state
  std::vector<BucketState> buckets;
  std::vector<GradGroup> groups;
  std::vector<int> group_of_param;
  std::vector<int> launch_order;  // layout.backward_bucket_order()
  size_t launch_cursor = 0;       // launch_order[cursor] is the next bucket to reduce
  std::vector<char> ready;        // per parameter, in the current micro-batch
  int ready_count = 0;
  int64_t micro = 0;              // complete micro-batches of the current step
  int64_t steps = 0;              // optimizer steps taken
  int64_t calls = 0;              // step() calls completed (skipped steps too): the timeline's step
  std::vector<int> layer_ids;     // distinct layer groups, ascending
  std::vector<int> scope_depth;   // per layer_ids index: open LayerScopes

  int64_t checkpoint_ops = 0;     // saves and loads so far: their store keys

  std::mutex timeline_mu;
  std::vector<TimelineEvent> timeline;

  // ---- helpers
  DType cdt() const { return opt.compute_dtype; }
  DType rdt() const { return opt.reduce_dtype; }
  bool last_micro() const { return micro == opt.accum_steps - 1; }
  // Every micro-batch reduce-scattered into the fp32 shard (EngineOptions::accumulate).
  bool sharded_accum() const { return shards_accumulation(opt); }
  // The dtype of reduced_grad(): the reduce dtype, or fp32 when the shard accumulates.
  DType reduced_dtype() const { return sharded_accum() ? DType::kF32 : rdt(); }
  int num_buckets() const { return static_cast<int>(layout.buckets().size()); }
  const Bucket& bucket(int b) const { return layout.buckets()[static_cast<size_t>(b)]; }
  const ParamPlacement& placement(int p) const { return layout.params()[static_cast<size_t>(p)]; }
  std::string param_label(int p) const;  // "'fc1.weight' [16, 8]"
  Status invalid(const std::string& what) const;  // kInvalidArgument "rank r: what"
  // Keeps the first failure and returns it.
  Status fail(const Status& status);
  // For calls that cannot return a Status (param(), grad(), a scope's end): the next
  // grad_ready(), layer() or step() returns it.
  void defer(const Status& status) { (void)fail(status); }
  // Whether `call`(p) may hand out a view: finalized, p valid, no earlier failure (else
  // the failure is deferred).
  bool view_allowed(const char* call, int p);
  OwnedRange owned(int b) const;
  // EngineOptions::trace: a collective point of bucket b, enqueued on the comm stream.
  void trace(TimelineEvent::Kind kind, int b, CollectiveOp op, int64_t bytes);
  // EngineOptions::trace: a point of the compute stream (taken now on the CPU).
  void stamp(TimelineEvent::Kind kind, int bucket = -1, CollectiveOp op = CollectiveOp::kAllReduce);

  // engine_init.cc
  Status check_registration();
  Status init_values();

  // engine_buffers.cc
  Status build_layout();
  Status allocate();
  Status build_optimizer();
  void reset_step_state();
  void reset_reductions();  // every bucket unreduced again (a new micro-batch to reduce)
  StatusOr<std::vector<float>> gather_master(int p);

  // engine_grads.cc
  void* grad_ptr(int p);
  Status grad_ready(int p);
  Status launch_ready_buckets();
  Status launch_bucket(int b);
  void* grad_in_bucket(int b);   // the trainer's gradient of bucket b (compute dtype)
  // The reduced gradient (reduce dtype) at flat offset `flat` (stages 0-1: the full
  // buffer) or shard offset `state` (stages 2-3: the owned shard).
  void* reduced_grad(int64_t flat, int64_t state);
  void* reduced_slice(int b);    // this rank's reduced slice of bucket b

  // engine_step.cc
  StatusOr<StepStats> step();

  // engine_stage3.cc
  Status enter_layer(int layer, Pass pass);
  void exit_layer(int layer);
  void* param_ptr(int p);
  void invalidate_gathered();
  Status prefetch_after_step();

  // engine_memory.cc
  MemoryReport memory_report() const;
};

}  // namespace zdp
