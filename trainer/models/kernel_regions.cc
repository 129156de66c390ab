// KernelTimer and the regions' names (kernel_regions.h).
#include "trainer/models/kernel_regions.h"

namespace zdp::trainer {
namespace {

// In KernelRegion order. The planner's kernels name these regions (gpu_step_model.cc).
constexpr const char* kNames[kNumKernelRegions] = {
    "embedding fwd",
    "layernorm fwd",
    "qkv linear fwd",
    "fused attention fwd (cuDNN)",
    "attention S = K^T Q",
    "causal softmax fwd",
    "attention O = V P",
    "attn proj linear fwd",
    "residual add + layernorm fwd",
    "fc linear (+gelu) fwd",
    "fc proj linear fwd",
    "residual add",
    "lm head fwd",
    "cross-entropy (loss, dlogits)",
    "lm head bwd (dx, dW)",
    "layernorm bwd (dx, dweight, dbias)",
    "fc proj linear bwd (dx, dW)",
    "fc linear (+gelu) bwd (dx, dW)",
    "attn proj linear bwd (dx, dW)",
    "fused attention bwd (cuDNN)",
    "attention bwd GEMMs (dP, dV, dQ, dK)",
    "causal softmax bwd",
    "qkv linear bwd (dx, dW)",
    "embedding bwd",
    "adamw (per bucket, once per step)",
    "engine: gradient accumulation and folds",
    "engine: gradient norm and step decision",
};

}  // namespace

const char* region_name(KernelRegion r) {
  const int i = static_cast<int>(r);
  return i >= 0 && i < kNumKernelRegions ? kNames[i] : "?";
}

bool region_from_name(const std::string& name, KernelRegion* r) {
  for (int i = 0; i < kNumKernelRegions; ++i) {
    if (name == kNames[i]) {
      *r = static_cast<KernelRegion>(i);
      return true;
    }
  }
  return false;
}

StatusOr<std::unique_ptr<KernelTimer>> KernelTimer::create(Device& device, Stream& stream) {
  StatusOr<std::unique_ptr<StreamClock>> clock = create_stream_clock(device);
  if (!clock.ok()) return clock.status().with_context("kernel timing (profile.kernels)");
  return std::unique_ptr<KernelTimer>(new KernelTimer(std::move(*clock), stream));
}

void KernelTimer::arm() {
  armed_ = true;
  ++times_.steps;
}

void KernelTimer::disarm() {
  leave();
  armed_ = false;
}

void KernelTimer::boundary(int opens) {
  const uint64_t id = next_id_++;
  // The CPU's compute stream is the calling thread: its point is now. A lost point (a
  // failed record) only merges two regions' intervals, which collect() then drops.
  if (clock_->mark(stream_, id, /*now=*/true).ok()) unread_.push_back(Point{id, opens});
  open_ = opens;
}

void KernelTimer::enter(KernelRegion r) {
  if (!armed_) return;
  const int i = static_cast<int>(r);
  ++times_.entries[static_cast<size_t>(i)];
  boundary(i);
}

void KernelTimer::leave() {
  if (armed_ && open_ >= 0) boundary(-1);
}

void KernelTimer::collect() {
  for (const auto& [id, seconds] : clock_->take()) {
    // Points come back in mark order; one that never comes back (lost) leaves a gap, and
    // the interval across it is not attributed.
    while (!unread_.empty() && unread_.front().id < id) {
      unread_.pop_front();
      last_opens_ = -1;
    }
    if (unread_.empty() || unread_.front().id != id) continue;
    if (last_opens_ >= 0 && seconds >= last_seconds_) times_.seconds[static_cast<size_t>(last_opens_)] += seconds - last_seconds_;
    last_opens_ = unread_.front().opens;
    last_seconds_ = seconds;
    unread_.pop_front();
  }
}

const RegionTimes& KernelTimer::times() {
  collect();
  return times_;
}

}  // namespace zdp::trainer
