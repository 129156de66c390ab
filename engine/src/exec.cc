// Exec: the engine's element-wise work and stream ordering on CPU and CUDA devices.
#include "engine/src/exec.h"

#include <cstring>

#include "runtime/internal/host_waits.h"

namespace zdp {

StatusOr<std::unique_ptr<Exec>> Exec::create(Device& device, std::chrono::milliseconds timeout) {
  std::unique_ptr<Exec> exec(new Exec(device, timeout));
  exec->cuda_ = device.kind() == DeviceKind::kCuda;
  ZDP_ASSIGN_OR_RETURN(exec->compute_, device.create_stream("engine compute"));
  // Highest priority: a collective waiting behind compute kernels delays every rank.
  ZDP_ASSIGN_OR_RETURN(exec->comm_, device.create_stream("engine comm", StreamPriority::kHigh));
  ZDP_ASSIGN_OR_RETURN(exec->handoff_, device.create_event());
  return exec;
}

Status Exec::comm_after_compute() {
  // CPU: the inline work is done already, and the compute stream's worker holds nothing,
  // so the event is reached at once; recording it anyway keeps one code path.
  ZDP_RETURN_IF_ERROR(compute_->record(*handoff_));
  return comm_->wait(*handoff_);
}

Status Exec::compute_after(Event& event, const std::string& what) {
  if (cuda_) return compute_->wait(event);
  // The CPU's compute stream is this thread: its wait for another stream is the one host
  // wait a CUDA engine leaves to the GPU, and is counted apart from the others.
  StreamOrderWait order;
  Status s = event.wait(timeout_);
  return s.ok() ? s : s.with_context(what);
}

Status Exec::memset(void* dst, int value, int64_t bytes) {
  if (bytes <= 0) return Status::Ok();
  if (cuda_) return compute_->memset_async(dst, value, static_cast<size_t>(bytes));
  std::memset(dst, value, static_cast<size_t>(bytes));
  return Status::Ok();
}

Status Exec::copy(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return Status::Ok();
  if (cuda_) return compute_->memcpy_async(dst, src, static_cast<size_t>(bytes));
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  return Status::Ok();
}

Status Exec::fold(const kernels::FoldArgs& args) {
  return cuda_ ? kernels::fold_cuda(args, compute_handle()) : kernels::fold_cpu(args);
}

Status Exec::fold_on_comm(const kernels::FoldArgs& args) {
  if (cuda_) return kernels::fold_cuda(args, static_cast<cudaStream_t>(comm_->native_handle()));
  return comm_->enqueue_host("fold of a reduced gradient slice", [args] { return kernels::fold_cpu(args); });
}

Status Exec::cast(const kernels::CastArgs& args) {
  return cuda_ ? kernels::cast_cuda(args, compute_handle()) : kernels::cast_cpu(args);
}

Status Exec::grad_check(const kernels::GradCheckArgs& args, void* workspace, int64_t workspace_bytes) {
  return cuda_ ? kernels::grad_check_cuda(args, workspace, workspace_bytes, compute_handle())
               : kernels::grad_check_cpu(args);
}

Status Exec::exact_sumsq(const kernels::ExactSumSqArgs& args) {
  return cuda_ ? kernels::exact_sumsq_cuda(args, compute_handle()) : kernels::exact_sumsq_cpu(args);
}

Status Exec::decide(const kernels::StepDecisionArgs& args) {
  return cuda_ ? kernels::decide_step_cuda(args, compute_handle()) : kernels::decide_step_cpu(args);
}

Status Exec::synchronize(const std::string& what) {
  Status c = compute_->synchronize(timeout_);
  if (!c.ok()) return c.with_context(what + ": compute stream");
  Status m = comm_->synchronize(timeout_);
  return m.ok() ? m : m.with_context(what + ": communication stream");
}

}  // namespace zdp
