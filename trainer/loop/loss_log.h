// The training loss of every step, kept where the model computes it and read by the host
// only when it logs (every train.log_every steps), so that no step waits on the host for
// it. No allocation after create().
//
// Default: each micro-batch adds its mean loss into a device double
// (Model::forward_backward), the last one rounds the step's mean to fp32 into the step's
// slot; read() sums the unread slots over the ranks (one all-reduce on the compute stream
// per read, not one a step), copies them to the host and divides by K in fp32. The ranks'
// partial sums follow the sampler's split, so the last bits depend on K, and from K = 3
// on the order of the ranks' sum (a ring's segments start at different ranks) on the
// step's slot: a resumed run may log a step's loss a last bit apart from an
// uninterrupted one. Deterministic mode is the one whose logged losses repeat bit for bit.
//
// Deterministic (train.deterministic): the same number for every world size K. Each
// micro-batch's mean loss (a double computed from its own rows only) goes to its own
// slot; end_step() all-gathers the ranks' slots (the bytes, as int64 words) and copies
// the step's M = K x accum means to the host. read() adds them in global micro-batch
// order g = m K + r (the sampler's: rank r's micro-batch m), left to right in double, and
// divides by M: one fixed sum over the same M doubles whatever K is. Costs M x 8 bytes
// per step on the wire.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/models/model.h"
#include "zdp/context.h"

namespace zdp::trainer {

class LossLog {
 public:
  enum class Order { kPerRank, kGlobalMicroBatches };
  // Room for `capacity` unread steps (>= 1), on `stream` (the engine's compute stream);
  // `accum` micro-batches per rank and step.
  static StatusOr<std::unique_ptr<LossLog>> create(Context& ctx, Ops& ops, Stream& stream, int64_t capacity,
                                                   int64_t accum, Order order);

  // Where micro-batch `micro` of `accum` adds its loss. REQUIRES: !full().
  LossSink sink(int64_t micro, int64_t accum);
  // After the step's micro-batches (no host wait): deterministic mode issues the gather
  // over ranks and the copy to the host; the default keeps the step's slot for read().
  Status end_step();
  bool full() const { return unread_ == capacity_; }
  // Waits for the steps ended so far; their losses (the mean over the global batch),
  // oldest first. Errors name the rank. Collective in the default order: every rank calls
  // it at the same steps.
  StatusOr<std::vector<double>> read();

 private:
  LossLog(Context& ctx, Stream& stream, int64_t capacity, int64_t accum, Order order)
      : ctx_(ctx), stream_(stream), capacity_(capacity), accum_(accum), order_(order) {}
  Status end_step_ordered(int64_t slot);
  Status sum_over_ranks();  // kPerRank: all slots summed over the ranks, copied to the host
  double ordered_mean(int64_t slot) const;

  Context& ctx_;
  Stream& stream_;
  const int64_t capacity_;
  const int64_t accum_;
  const Order order_;
  int64_t first_ = 0;   // slot of the oldest unread step
  int64_t unread_ = 0;  // steps ended and not read
  // kPerRank:
  DeviceBuffer sum_;    // one double: the step's running mean over its micro-batches
  DeviceBuffer slots_;  // capacity fp32: each step's mean, then its sum over ranks
  DeviceBuffer host_;   // capacity fp32, pinned on GPUs
  // kGlobalMicroBatches:
  // capacity x accum doubles: this rank's micro-batch means, a row per unread step (on
  // the CPU the model writes the next step's while this one's all-gather may still wait
  // on the stream: one buffer for all steps was a race).
  DeviceBuffer micro_;
  DeviceBuffer gathered_;  // K x accum doubles, rank-major (rank r's at r x accum)
  DeviceBuffer host_means_;  // capacity x K x accum doubles, pinned on GPUs
  std::unique_ptr<Event> copied_;  // after the latest copy to the host
};

}  // namespace zdp::trainer
