// The training loss of every step, kept where the model computes it and read by the host
// only when it logs (every train.log_every steps), so that no step waits on the host for
// it: each micro-batch adds its mean loss into a device double (Model::forward_backward),
// the last one rounds the step's mean to fp32 into the step's slot, which is summed over
// the ranks (all-reduce on the compute stream) and copied into a host slot. read() waits
// for the copies issued so far and hands back every unread step's loss. No allocation
// after create().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/models/model.h"
#include "zdp/context.h"

namespace zdp::trainer {

class LossLog {
 public:
  // Room for `capacity` unread steps (>= 1), on `stream` (the engine's compute stream).
  static StatusOr<std::unique_ptr<LossLog>> create(Context& ctx, Ops& ops, Stream& stream, int64_t capacity);

  // Where micro-batch `micro` of `accum` adds its loss. REQUIRES: !full().
  LossSink sink(int64_t micro, int64_t accum);
  // After the step's micro-batches: the sum over ranks and the copy to the host slot are
  // issued (no host wait).
  Status end_step();
  bool full() const { return unread_ == capacity_; }
  // Waits for the steps ended so far; their losses (the mean over the global batch),
  // oldest first. Errors name the rank.
  StatusOr<std::vector<double>> read();

 private:
  LossLog(Context& ctx, Stream& stream, int64_t capacity) : ctx_(ctx), stream_(stream), capacity_(capacity) {}

  Context& ctx_;
  Stream& stream_;
  const int64_t capacity_;
  int64_t first_ = 0;   // slot of the oldest unread step
  int64_t unread_ = 0;  // steps ended and not read
  DeviceBuffer sum_;    // one double: the step's running mean over its micro-batches
  DeviceBuffer slots_;  // capacity fp32: each step's mean, then its sum over ranks
  DeviceBuffer host_;   // capacity fp32, pinned on GPUs
  std::unique_ptr<Event> copied_;  // after the latest copy to host_
};

}  // namespace zdp::trainer
