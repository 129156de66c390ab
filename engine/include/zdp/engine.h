// The ZeRO engine: what a trainer embeds. It owns the parameters (flat buffers, buckets,
// slices; see docs/design.md), hands out views in the compute dtype, reduces the
// gradients per bucket as they become ready (overlapping backward), and runs the sharded
// optimizer step. Stages 0 (DDP), 1 (optimizer state sharded), 2 (+ gradients), 3 (+
// parameters, gathered per layer group). README.md "Use zdp from your own trainer" has a
// complete example (compiled as tests/unit/readme_example_test.cc).
//
// Every rank runs the same calls in the same order: add_param, finalize, then per step
// accum_steps() micro-batches of {layer scopes, param views, grad views, grad_ready} and
// one step(). Collectives are issued in an order fixed by the layout (never by timing), so
// ranks agree even when their backward passes interleave differently.
//
// Gradient scaling: the trainer writes the gradient of ITS micro-batch's mean loss (times
// loss_scale() for fp16). The engine sums over ranks and micro-batches and divides by
// world_size x accum_steps, so the update is the one a single rank would make on the
// global batch (docs/design.md, "The theorem").
//
// Memory per stage: finalize() allocates by the rules of docs/design.md "Memory per rank",
// written once in code (engine/src/buffer_plan.cc); plan_memory() (zdp/memory_plan.h, what
// `dp-launch plan` prints) and memory()'s "planned" column report the same rules, so all
// three agree byte for byte. The ZeRO formula (memory()'s "formula" column) counts none of
// the padding, copies, staging buffers or workspace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zdp/checkpoint.h"
#include "zdp/comm.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp {

// How add_param fills a parameter. Rank 0 computes element i of parameter "name" as a
// pure function of (EngineOptions::seed, name, i), then broadcasts, so the values do not
// depend on the world size, the stage or the registration order of other parameters.
struct Init {
  enum class Kind { kZeros, kConstant, kNormal, kUniform };
  Kind kind = Kind::kZeros;
  float a = 0.0f;  // kConstant: the value; kNormal: std; kUniform: low
  float b = 0.0f;  // kNormal: mean; kUniform: high
  static Init zeros() { return {Kind::kZeros, 0, 0}; }
  static Init constant(float value) { return {Kind::kConstant, value, 0}; }
  static Init normal(float std, float mean = 0.0f) { return {Kind::kNormal, std, mean}; }
  static Init uniform(float low, float high) { return {Kind::kUniform, low, high}; }
};

// Whether weight decay applies to a parameter: kByName follows optim's usual rule (none
// for "*.bias", "bias", "*norm*", "*ln_*", "ln<digit>" / "lnf" (and their ".*") and
// llm.c's "ln1w" / "lnfb" names, without case); kDecay / kNoDecay force it either way.
enum class Decay { kByName, kDecay, kNoDecay };
const char* to_string(Decay decay);

// fp16 dynamic loss scaling (ignored for fp32/bf16 compute): torch.cuda.amp.GradScaler's
// rule with a floor.
struct LossScaleOptions {
  double initial = 65536.0;        // 2^16
  int64_t growth_interval = 2000;  // steps without overflow before the scale grows
  double growth_factor = 2.0;
  double backoff = 0.5;            // multiplier after an overflow (the step is skipped)
  double min_scale = 1.0;          // the scale never backs off below this
};

struct EngineOptions {
  ZeroConfig zero;                     // the [zero] section: stage, buckets, reduce dtype,
                                       // overlap, prefetch, accumulation (zdp/config.h)
  DType compute_dtype = DType::kF32;   // of the parameter views and the gradients the trainer writes
  bool overlap_param_gather = false;   // step() returns with the parameter all-gathers in flight;
                                       // each parameter view waits for its own buckets
  int64_t accum_steps = 1;             // micro-batches per optimizer step on each rank
  OptimConfig optim;                   // lr, betas, eps, weight decay, clipping, schedule
  int64_t total_steps = 0;             // where a cosine/linear schedule reaches min_lr
  int64_t global_batch = 0;            // samples per step over all ranks; with optim.lr_scaling,
                                       // lr follows it from optim.base_batch (0: no scaling)
  int64_t seed = 1234;                 // parameter initialisation and stochastic rounding
  LossScaleOptions loss_scale;
  bool trace = false;                  // record the timeline of collectives and step phases
                                       // (Engine::timeline(), zdp::Profiler)
  // Bit-identical results at any world size and stage (train.deterministic): every
  // micro-batch's gradient is gathered to its owners and summed there in one fixed
  // pairwise tree over the global micro-batch index (micro-batch m of rank r is global
  // micro-batch m x world + r, the reference sampler's), and the gradient norm is summed
  // exactly. Costs K x the reduce-scatter's bytes; docs/design.md "Deterministic mode".
  // The trainer's part: each micro-batch's gradient must depend on its samples alone
  // (not on the thread count, which dp-launch sets to cores / K, nor on the CPU's kernel
  // choice: a threaded BLAS on one thread, one OpenBLAS core on every node).
  bool deterministic = false;
  // Stage 3: layer scopes the trainer keeps open inside another one (dp-train's GPT opens
  // the tied embedding's group inside the LM head's): one more gathered-parameter buffer
  // each, planned and allocated at finalize() (else the pool grew by one during the first
  // step, beyond the plan and the memory table). 0..64.
  int nested_layer_scopes = 0;

  // From the config's [zero], [optim], [train] sections and [model] dtype, for
  // `world_size` ranks (validate_for_world first). optim.lr and min_lr come out scaled to
  // train.global_batch by optim.lr_scaling (which is then kNone: applied once).
  // trace follows profile.enabled; overlap_param_gather keeps its default.
  static StatusOr<EngineOptions> from(const Config& config, int world_size);
  // kInvalidArgument naming every bad field: a stage outside 0..3, bucket_mb <= 0, a
  // reduce dtype other than fp32/bf16, accum_steps < 1, accumulate kSharded at stage 0-1, ...
  Status validate() const;
};

struct Param {
  int index = -1;
};

struct StepStats {
  int64_t step = 0;          // optimizer steps taken so far (skipped ones not counted)
  bool skipped = false;      // fp16 overflow somewhere: no rank updated
  double grad_norm = 0.0;    // global L2 norm of the averaged gradient before clipping
  double clip_coef = 1.0;    // the factor clipping applied (1: none; 0 on a skipped step)
  double lr = 0.0;           // the learning rate this step used (0 when skipped)
  double loss_scale = 1.0;   // the scale for the next step (1 unless fp16)
};

// Bytes per category on this rank: measured (device accounting of the engine's own
// buffers) next to the ZeRO formula of docs/design.md for the same parameter count and to the
// plan of this layout (MemoryPlan::bytes: what `dp-launch plan` prints for this model).
struct MemoryReport {
  struct Row {
    std::string category;  // "params", "grads", "optimizer", "buckets", "workspace", "total"
    int64_t measured = 0;  // now (staging buffers added for a trainer that holds more
                           // gradient groups at once than planned show here)
    int64_t formula = 0;   // docs/design.md's formula (no padding, no buffers)
    int64_t planned = 0;   // plan_memory()'s: the buffers finalize() allocated, by the same
                           // rules (the CUDA decay table and step decision aside)
  };
  int stage = 0;
  int world_size = 1;
  int64_t params = 0;          // Psi: elements of all registered parameters
  int64_t padded_elems = 0;    // the flat buffer, padding included
  std::vector<Row> rows;
  // One row per category: measured, formula, planned and the gap (measured - formula), in
  // MiB: the log finalize() writes on rank 0.
  std::string table() const;
};

// A point of the engine's timeline (EngineOptions::trace), what zdp::Profiler turns into
// step breakdowns and traces, timed when its stream reaches it: on CUDA by a timing event
// (no host callback in either stream), on the CPU by the host (compute points at once,
// the calling thread being the compute stream, but kIterationEnd when the compute stream's
// worker has run what the trainer queued there: it may come in a later take_timeline(),
// after the next step's kIterationBegin; collective points when the communication
// stream's worker gets there). `seconds` is std::chrono::steady_clock's time_since_epoch,
// comparable with the trainer's own steady_clock readings.
struct TimelineEvent {
  enum class Kind {
    // Communication stream: one bucket's collective starts / ends (bucket, op, bytes).
    kReduceStart, kReduceEnd, kGatherStart, kGatherEnd,
    // Compute stream, inside step(): it starts; every bucket's reduction has arrived (the
    // time between is exposed reduction time); the global norm is known (per-bucket
    // statistics and their all-reduce, traced as a collective of bucket -1); the optimizer has run over the owned slices
    // (stages 1-2: issuing each bucket's all-gather); step() returns (having waited for
    // the all-gathers unless overlap_param_gather).
    kStepBegin, kReductionsDone, kNormDone, kOptimizerDone, kStepEnd,
    // Compute stream, outside step(): a wait for communication (op kAllGather: parameter
    // all-gathers of a stage-3 layer group or of a view with overlap_param_gather; else a
    // gradient staging buffer still being reduced); `bucket`: the first one waited for.
    kCommWaitBegin, kCommWaitEnd,
    // Compute stream: the trainer's points (Engine::mark): an iteration begins (before its
    // first batch is loaded), a micro-batch's forward begins (its batch is loaded), its
    // backward begins, its backward ends (every grad_ready called), the iteration ends
    // (after step() and the trainer's own per-step work).
    kIterationBegin, kForward, kBackward, kMicroEnd, kIterationEnd,
    // The trainer's work between steps that no step should count (an evaluation): every
    // point and collective issued between kOutsideBegin and kOutsideEnd has step -1 (a
    // stage-3 evaluation's gathers were counted in the next step's communication).
    kOutsideBegin, kOutsideEnd,
  };
  Kind kind = Kind::kReduceStart;
  int bucket = -1;
  // The iteration it belongs to: step() calls before it (skipped steps count), except
  // kIterationEnd, which comes after the step() it ends; -1 between kOutsideBegin and
  // kOutsideEnd.
  int64_t step = 0;
  double seconds = 0.0;
  CollectiveOp op = CollectiveOp::kAllReduce;  // collective points: the operation
  int64_t bytes = 0;  // collective points: nccl-tests' "size" of the bucket's collective:
                      // the all-reduce buffer, the reduce-scatter input, the all-gather output
};

class Engine {
 public:
  // REQUIRES: `ctx` outlives the engine and stays where it is (not moved from). Options
  // are checked by finalize(). Checked too (Context::lifetime()): after the context goes,
  // every call is refused and the destructor leaves the buffers unfreed, with an error.
  Engine(Context& ctx, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // REQUIRES: before finalize(); names unique; `layer` (the layer group) >= 0 and
  // non-decreasing. kInvalidArgument names the parameter.
  StatusOr<Param> add_param(const std::string& name, const std::vector<int64_t>& shape, Init init, int layer = 0,
                            Decay decay = Decay::kByName);
  // Collective. Checks the options, verifies that every rank registered the same
  // parameters (a mismatch names the first differing parameter on every rank), builds
  // the layout and buffers, initialises on rank 0, broadcasts, and verifies by a hash
  // across ranks that every rank holds the same values. Logs the memory table on rank 0.
  Status finalize();

  int64_t accum_steps() const;
  // True once finalize() has succeeded.
  bool finalized() const;
  const EngineOptions& options() const;
  int rank() const;
  int world_size() const;

  // Stage 3: gathers layer group `layer` (waiting for its all-gather, prefetching the
  // next prefetch_layers groups in the direction of `pass`) and releases it when the
  // scope ends. Use one around each layer in forward and again in backward. Stages 0-2:
  // it gathers nothing, but is counted as at stage 3: a scope must end before step() and
  // save_checkpoint() at every stage (kInvalidArgument names its layer group).
  class LayerScope {
   public:
    LayerScope() = default;
    LayerScope(LayerScope&&) noexcept;
    LayerScope& operator=(LayerScope&&) noexcept;
    ~LayerScope();

   private:
    friend class Engine;
    LayerScope(Engine* engine, int layer, std::weak_ptr<void> alive)
        : engine_(engine), layer_(layer), alive_(std::move(alive)) {}
    void end();
    Engine* engine_ = nullptr;
    int layer_ = -1;
    std::weak_ptr<void> alive_;  // expires with the engine: a scope that outlives it ends nothing
  };
  enum class Pass { kForward, kBackward };
  StatusOr<LayerScope> layer(int layer, Pass pass = Pass::kForward);

  // The parameter in the compute dtype, on the engine's device. Stage 3: valid inside an
  // open scope of its layer group (nullptr outside, a prefetched group included; not a
  // failure). With overlap_param_gather the call orders the compute
  // stream after the all-gather of the parameter's buckets. nullptr after a failure, which
  // the next grad_ready()/step() returns.
  void* param(Param p);
  template <typename T>
  T* param_as(Param p) { return static_cast<T*>(typed(param(p), sizeof(T), "param_as", p)); }
  // Where the trainer writes this micro-batch's gradient of `p` (compute dtype; the
  // trainer overwrites it, the engine accumulates). Stages 2-3: a staging buffer handed
  // out for this micro-batch only. nullptr after a failure, as param().
  void* grad(Param p);
  template <typename T>
  T* grad_as(Param p) { return static_cast<T*>(typed(grad(p), sizeof(T), "grad_as", p)); }
  // The gradient in grad(p) is complete (on the compute stream): the trainer must not
  // write it again in this micro-batch. Before the last micro-batch each bucket whose
  // parameters are all ready is folded into the fp32 accumulation (accumulate kLocal); on
  // the last, or on every one with kSharded, each such bucket starts its reduction (in the
  // layout's backward order).
  Status grad_ready(Param p);
  // The scale the trainer multiplies its loss by (fp16; 1 otherwise). fp16: follows the
  // outcome of the last step, so on GPUs it waits for the device to decide that step
  // (call it once per micro-batch, in backward, when the forward is already queued).
  double loss_scale() const;
  // The first failure the engine saw, or OK: what a nullptr view stands for. Failures are
  // sticky: after one, every call returns it (the job must stop, as after a dead peer).
  Status error() const;

  // Completes the reductions, computes the global gradient norm (sum of squares of the
  // owned slices, one all-reduce), skips the step on every rank if any gradient is
  // not finite (fp16: and backs off the loss scale), unscales and clips inside the fused
  // optimizer pass over the owned slices, and re-gathers the parameters (stages 1-2).
  // All of it is issued on the engine's streams: on GPUs the norm, the skip decision and
  // the clip factor stay in device memory, where the optimizer kernels read them, and the
  // call returns without waiting for the device. The host learns the step's outcome
  // later: step_stats(), loss_scale() (fp16), a checkpoint, or a later step_async(),
  // which waits only for a step older than the previous one (so the host runs at most
  // two steps ahead of the device). On the CPU it is learnt at once.
  // REQUIRES: accum_steps() complete micro-batches since the last step.
  Status step_async();
  // The statistics of the last step issued: waits for the device to decide it (a host
  // synchronisation on GPUs, as any read of a value the device computes; a trainer that
  // logs every N steps asks every N steps). kInvalidArgument before the first step.
  StatusOr<StepStats> step_stats();
  // step_async() then step_stats(): one step and its statistics.
  StatusOr<StepStats> step();

  // The compute stream: trainer kernels go here on GPUs; the engine's events order the
  // communication stream against it. On the CPU the engine's own element-wise work runs
  // on the calling thread (the trainer's thread is the CPU's compute stream).
  // REQUIRES: finalize() succeeded (else throws zdp::Error, kInvalidArgument).
  Stream& compute_stream();
  MemoryReport memory() const;
  // REQUIRES: EngineOptions::trace. Waits for both streams first, then returns every
  // event not yet taken by take_timeline().
  StatusOr<std::vector<TimelineEvent>> timeline();
  // Removes and returns the events whose stream has reached them, without waiting: points
  // of work still in flight come with a later call. A profiler drains the timeline each step so
  // that it does not grow with the run. Empty when trace is off.
  std::vector<TimelineEvent> take_timeline();
  // Records one of the trainer's points (kIterationBegin ... kIterationEnd) on the compute
  // stream; no-op when EngineOptions::trace is off, kInvalidArgument for the engine's own
  // kinds. The reference trainer's loop and models show where each goes.
  Status mark(TimelineEvent::Kind kind);

  // Collective (every rank calls it for the same parameters): the fp32 master value of a
  // whole parameter, gathered from the owning ranks. For tests and checkpoints.
  StatusOr<std::vector<float>> gather_master(Param p);
  // ---- Checkpoints (format, atomicity and node-local mode: zdp/checkpoint.h)
  //
  // Collective: every rank calls it with the same `state` fields and options (and the
  // same `root`, or in kPerNode mode the same root on each node; a different step, data
  // position, option or shared root is refused on every rank before anything is
  // written). Writes
  // <root>/step-<state.step>/ from every rank's owned slices in parallel, then updates
  // <root>/latest and keeps options.keep checkpoints. Returns the directory written.
  // Fails on every rank when any rank fails (the message names the rank and the file).
  // REQUIRES: finalize() succeeded; between steps (no micro-batch of the next step
  // begun, no layer scope open).
  StatusOr<std::string> save_checkpoint(const std::string& root, const CheckpointState& state,
                                        const SaveOptions& options = {});
  // Collective: restores a checkpoint saved at any world size and stage into this
  // engine. `path_or_root` is a step-<N> directory or a root (its newest complete
  // checkpoint, as find_latest_checkpoint). Each rank reads only the ranges of its own
  // slices (all of them at stage 0) and verifies the checksums of the chunks it reads;
  // then the compute-dtype parameters are recomputed from the masters and gathered, so
  // every rank is consistent, and the optimizer step count and loss scale are restored
  // (LoadOptions::scope). Refuses, on every rank and naming the rank and the file: a
  // checkpoint of another model (the first parameter whose name or shape differs, or a
  // tensor the model lacks), a missing or truncated file, a checksum mismatch (file,
  // chunk, byte range), a malformed state.json. Everything but the checksums is checked
  // before the first byte of the engine's state changes: such a refusal leaves the engine
  // as it was. A failure after that (checksum, I/O) leaves it partly loaded, and it is
  // marked failed (error()). Returns the saved CheckpointState
  // (its engine fields are those at save time, `path` the directory read).
  // REQUIRES: as save_checkpoint.
  StatusOr<CheckpointState> load_checkpoint(const std::string& path_or_root, const LoadOptions& options = {});

  std::vector<std::string> param_names() const;
  // A description of the layout (one line per bucket); empty before finalize().
  std::string describe_layout() const;

  struct Impl;

 private:
  void end_scope(int layer);
  // `view`, or nullptr and a failure (error()) when `bytes` is not an element of the
  // compute dtype: param_as<float> of a bf16 view read twice its length.
  void* typed(void* view, size_t bytes, const char* call, Param p);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zdp
