// Where the engine's work runs: the one place where the CPU and CUDA devices differ.
// CUDA: element-wise kernels are enqueued on the compute stream and the two streams are
// ordered by events, so the host never waits in the hot path. CPU: the trainer writes
// its gradients with plain host stores on its own thread, so that thread is the CPU's
// compute stream: the engine's element-wise work runs there, inline (queued on a worker
// it would race with the trainer's next writes), and "compute waits for an event" is a
// host wait. Collectives always run on the communication stream.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kernels/cast.h"
#include "kernels/exact_sumsq.h"
#include "kernels/fold.h"
#include "kernels/grad_check.h"
#include "kernels/quantize.h"
#include "kernels/step_decision.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {

class Exec {
 public:
  // `timeout` bounds a host wait without progress: it should exceed the collective
  // timeout, so that a collective's own error (naming it) arrives first. A wait that times
  // out while `comm` keeps completing collectives waits again (the queue of a step's
  // reductions behind a slow but healthy rank can take longer than one timeout); one with
  // none completed fails naming the collective in flight. `comm` may be null.
  static StatusOr<std::unique_ptr<Exec>> create(Device& device, std::chrono::milliseconds timeout,
                                                const Communicator* comm);

  bool cuda() const { return cuda_; }
  Device& device() { return device_; }
  Stream& compute() { return *compute_; }
  Stream& comm() { return *comm_; }
  cudaStream_t compute_handle() { return static_cast<cudaStream_t>(compute_->native_handle()); }

  // Later work on the communication stream starts after all compute work issued so far.
  Status comm_after_compute();
  // Later compute work starts after `event`. `what` names the wait in errors.
  Status compute_after(Event& event, const std::string& what);
  // Records `event` at the current end of the compute stream.
  Status record_compute(Event& event) { return compute_->record(event); }

  Status memset(void* dst, int value, int64_t bytes);
  Status copy(void* dst, const void* src, int64_t bytes);
  Status fold(const kernels::FoldArgs& args);
  // The fold on the communication stream, after the collectives issued so far (CPU: a host
  // task of that stream): for reduction outputs, which the compute stream never waits for
  // before step().
  Status fold_on_comm(const kernels::FoldArgs& args);
  Status cast(const kernels::CastArgs& args);
  // x *= scale in place on the compute stream (kernels/cast.h).
  Status scale(const kernels::ScaleArgs& args);
  // Compressed communication (kernels/quantize.h): the gradient's quantization on the
  // compute stream (it reads what backward wrote and updates the error feedback); the
  // parameters' quantization and every dequantization on the communication stream,
  // around the collective that moves the chunks.
  Status quantize(const kernels::QuantizeArgs& args);
  Status quantize_on_comm(const kernels::QuantizeArgs& args);
  Status dequant_sum_on_comm(const kernels::DequantSumArgs& args);
  Status dequantize_on_comm(const kernels::DequantizeArgs& args);
  // `workspace` of kernels::grad_check_workspace_bytes (CUDA only).
  Status grad_check(const kernels::GradCheckArgs& args, void* workspace, int64_t workspace_bytes);
  // Deterministic mode's exact sum of squares (kernels/exact_sumsq.h), added into args.out.
  Status exact_sumsq(const kernels::ExactSumSqArgs& args);
  // The step decision (kernels/step_decision.h) on the compute stream.
  Status decide(const kernels::StepDecisionArgs& args);
  // Both streams drained; the host waits.
  Status synchronize(const std::string& what);

 private:
  Exec(Device& device, std::chrono::milliseconds timeout, const Communicator* comm)
      : device_(device), timeout_(timeout), comm_progress_(comm) {}
  // Calls `wait_once(timeout_)` again while collectives complete in between (see create).
  Status wait_progressing(const std::function<Status(std::chrono::milliseconds)>& wait_once,
                          const std::function<bool()>& failed, const std::string& what);
  Device& device_;
  std::chrono::milliseconds timeout_;
  const Communicator* comm_progress_;
  bool cuda_ = false;
  std::unique_ptr<Stream> compute_;
  std::unique_ptr<Stream> comm_;
  std::unique_ptr<Event> handoff_;  // compute -> comm ordering point, re-recorded each time
};

}  // namespace zdp
