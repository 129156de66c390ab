// Per-kernel timing of the gpt model in profiling runs (profile.kernels): the model marks
// where each of its kernel regions starts on the compute stream, rank 0 writes the mean
// time per step of each region to <profile dir>/kernels.json, and
// `dp-launch plan --from-profile DIR` sets it beside the planner's per-kernel prediction
// (planner/gpu_step_model.h), whose kernels carry the same regions. A region is one
// model-level operation (a linear layer's forward, a LayerNorm, the cross-entropy), which
// is one or a few launches on a GPU.
//
// How it is timed: one point per region boundary on the compute stream
// (runtime/internal/stream_clock.h: a timing event on CUDA, the trainer's clock on the
// CPU, whose compute stream is the trainer's thread), so a region's time is what the
// stream spent from its start to the next boundary: its kernels and any gap before the
// next one. On a GPU that costs one cudaEventRecord per region on the host (about 200
// per micro-batch for gpt2-124m) and nothing the GPU waits for.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "runtime/internal/stream_clock.h"
#include "zdp/device.h"
#include "zdp/status.h"

namespace zdp::trainer {

// The gpt's kernel regions, in the order a micro-batch runs them.
enum class KernelRegion : int {
  kEmbeddingFwd = 0,
  kLayernormFwd,
  kQkvFwd,
  kFusedAttentionFwd,
  kAttentionScoresFwd,
  kSoftmaxFwd,
  kAttentionValuesFwd,
  kProjFwd,
  kResidualLayernormFwd,
  kFcFwd,
  kFcProjFwd,
  kResidualAdd,  // none since the residual rides in fc proj's GEMM (Ops::linear); kept for older profiles' names
  kLmHeadFwd,
  kCrossEntropy,
  kLmHeadBwd,
  kLayernormBwd,
  kFcProjBwd,
  kFcBwd,
  kProjBwd,
  kFusedAttentionBwd,
  kAttentionBwdGemms,
  kSoftmaxBwd,
  kQkvBwd,
  kEmbeddingBwd,
  // The engine's own kernels (planner/engine_kernels.h). The optimizer is read from the
  // profile's "optimizer" part (profile.jsonl), the gradient norm and step decision from
  // its "norm" part; the gradient accumulation and folds are timed by the model around
  // its grad_ready calls (kGradHandoff).
  kAdamW,
  kGradHandoff,
  kGradNorm,
};
inline constexpr int kNumKernelRegions = static_cast<int>(KernelRegion::kGradNorm) + 1;

// "qkv linear fwd", "causal softmax bwd", ...: the names kernels.json and the planner use.
const char* region_name(KernelRegion r);
// The region named `name`; false when none is.
bool region_from_name(const std::string& name, KernelRegion* r);

// <profile dir>/kernels.json (trainer/loop/kernel_profile.h writes it, the planner reads it):
// {"format": "zdp-kernel-times", "version": 3, "rank", "device", "device_kind",
// "world_size", "zero_stage", "model": {"layers", "d_model", "heads", "vocab", "seq",
// "micro_batch", "accum_steps", "dtype", "fused_attention", "dgelu_epilogue"}, "engine":
// {"deterministic", "reduce_dtype", "sharded_accumulation", "buckets": [each bucket's
// padded elements, in layout order]}, "steps", "regions": [{"name", "entries_per_step",
// "ms_per_step"}]} (the regions the run entered, in KernelRegion order). What the engine
// ran decides the planner's engine rows, as the model's shape decides its kernels.
// Version 1 had no world_size and zero_stage (read as one rank's run), versions 1-2 no
// "engine" and no "dgelu_epilogue" (the planner then takes them from the config).
inline constexpr const char* kKernelTimesFormat = "zdp-kernel-times";
inline constexpr int kKernelTimesVersion = 3;

// What a profiled run measured per region, summed over its measured steps.
struct RegionTimes {
  std::array<double, kNumKernelRegions> seconds{};
  std::array<int64_t, kNumKernelRegions> entries{};  // regions entered
  int64_t steps = 0;                                 // measured steps
};

class KernelTimer {
 public:
  // REQUIRES: `stream` (the engine's compute stream) outlives the timer.
  static StatusOr<std::unique_ptr<KernelTimer>> create(Device& device, Stream& stream);

  // Between arm() and disarm() the regions entered count toward a measured step; outside,
  // enter() and leave() do nothing (warm-up steps, evaluation).
  void arm();
  void disarm();
  // Ends the open region (if any) and starts `r` at the stream's current end of work.
  void enter(KernelRegion r);
  // Ends the open region: what the stream runs next is not the model's (engine work).
  void leave();
  // Reads the boundaries the stream has passed (never waits). Call once per step.
  void collect();
  // After the stream has finished all work (the caller synchronised it): every region.
  const RegionTimes& times();

 private:
  KernelTimer(std::unique_ptr<StreamClock> clock, Stream& stream) : clock_(std::move(clock)), stream_(stream) {}
  void boundary(int opens);  // a point that ends the open region and opens `opens` (-1: none)

  std::unique_ptr<StreamClock> clock_;
  Stream& stream_;
  bool armed_ = false;
  int open_ = -1;          // the region open on the stream, -1 when none
  uint64_t next_id_ = 0;
  struct Point {
    uint64_t id;
    int opens;  // the region it starts, -1 for none
  };
  std::deque<Point> unread_;  // marked, not yet read back, in mark order
  int last_opens_ = -1;       // the region started by the last point read (-1: none), and when
  double last_seconds_ = 0;
  RegionTimes times_;
};

}  // namespace zdp::trainer
