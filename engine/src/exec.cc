// Exec: the engine's element-wise work and stream ordering on CPU and CUDA devices.
#include "engine/src/exec.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "runtime/internal/host_waits.h"

namespace zdp {

StatusOr<std::unique_ptr<Exec>> Exec::create(Device& device, std::chrono::milliseconds timeout,
                                             const Communicator* comm) {
  std::unique_ptr<Exec> exec(new Exec(device, timeout, comm));
  exec->cuda_ = device.kind() == DeviceKind::kCuda;
  ZDP_ASSIGN_OR_RETURN(exec->compute_, device.create_stream("engine compute"));
  // Highest priority: a collective waiting behind compute kernels delays every rank.
  ZDP_ASSIGN_OR_RETURN(exec->comm_, device.create_stream("engine comm", StreamPriority::kHigh));
  ZDP_ASSIGN_OR_RETURN(exec->handoff_, device.create_event());
  return exec;
}

Status Exec::comm_after_compute() {
  // CPU: the inline work is done already; the event is reached once the compute stream's
  // worker has run what a trainer queued there (a collective of its own, such as
  // dp-train's losses' all-gather in deterministic mode), usually at once.
  ZDP_RETURN_IF_ERROR(compute_->record(*handoff_));
  return comm_->wait(*handoff_);
}

Status Exec::compute_after(Event& event, const std::string& what) {
  if (cuda_) return compute_->wait(event);
  // The CPU's compute stream is this thread: its wait for another stream is the one host
  // wait a CUDA engine leaves to the GPU, and is counted apart from the others.
  StreamOrderWait order;
  return wait_progressing([&](std::chrono::milliseconds t) { return event.wait(t); },
                          [&] { return !comm_->error().ok() || !compute_->error().ok(); }, what);
}

Status Exec::wait_progressing(const std::function<Status(std::chrono::milliseconds)>& wait_once,
                              const std::function<bool()>& failed, const std::string& what) {
  auto completed = [&] { return comm_progress_ != nullptr ? comm_progress_->progress().completed : 0; };
  uint64_t seen = completed();
  for (;;) {
    const Status s = wait_once(timeout_);
    // Done, or failed (a failed stream's error may itself be a kTimeout: a collective's).
    if (s.ok() || s.code() != StatusCode::kTimeout || failed()) return s.ok() ? s : s.with_context(what);
    const uint64_t now = completed();
    if (now != seen) {  // slow, not stuck: the collectives ahead keep completing
      seen = now;
      continue;
    }
    std::string in_flight;
    if (comm_progress_ != nullptr) {
      const CommProgress p = comm_progress_->progress();
      if (p.in_flight) in_flight = "; in flight for " + std::to_string(static_cast<int64_t>(p.current_s)) + " s: " +
                                   p.current.describe();
    }
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g s", static_cast<double>(timeout_.count()) / 1000.0);
    return Status(StatusCode::kTimeout,
                  what + ": not reached after " + seconds + " in which no collective completed" + in_flight);
  }
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

Status Exec::quantize(const kernels::QuantizeArgs& args) {
  return cuda_ ? kernels::quantize_cuda(args, compute_handle()) : kernels::quantize_cpu(args);
}

Status Exec::quantize_on_comm(const kernels::QuantizeArgs& args) {
  if (cuda_) return kernels::quantize_cuda(args, static_cast<cudaStream_t>(comm_->native_handle()));
  return comm_->enqueue_host("quantization of a parameter slice", [args] { return kernels::quantize_cpu(args); });
}

Status Exec::dequant_sum_on_comm(const kernels::DequantSumArgs& args) {
  if (cuda_) return kernels::dequant_sum_cuda(args, static_cast<cudaStream_t>(comm_->native_handle()));
  return comm_->enqueue_host("sum of dequantized gradient chunks", [args] { return kernels::dequant_sum_cpu(args); });
}

Status Exec::dequantize_on_comm(const kernels::DequantizeArgs& args) {
  if (cuda_) return kernels::dequantize_cuda(args, static_cast<cudaStream_t>(comm_->native_handle()));
  return comm_->enqueue_host("dequantization of gathered parameters", [args] { return kernels::dequantize_cpu(args); });
}

Status Exec::cast(const kernels::CastArgs& args) {
  return cuda_ ? kernels::cast_cuda(args, compute_handle()) : kernels::cast_cpu(args);
}

Status Exec::scale(const kernels::ScaleArgs& args) {
  return cuda_ ? kernels::scale_cuda(args, compute_handle()) : kernels::scale_cpu(args);
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
  for (auto [stream, name] : {std::pair<Stream*, const char*>{compute_.get(), ": compute stream"},
                              std::pair<Stream*, const char*>{comm_.get(), ": communication stream"}}) {
    ZDP_RETURN_IF_ERROR(wait_progressing([stream = stream](std::chrono::milliseconds t) { return stream->synchronize(t); },
                                         [stream = stream] { return !stream->error().ok(); }, what + name));
  }
  return Status::Ok();
}

}  // namespace zdp
