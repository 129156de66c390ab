// The CUDA device: cudaMalloc'd and pinned memory, non-blocking streams whose failures
// are sticky (like the CPU device's), events polled with a timeout.
//
// Nothing here blocks inside the CUDA runtime without a deadline: synchronize() and
// Event::wait() poll cudaStreamQuery / cudaEventQuery instead of calling
// cudaStreamSynchronize, which can hang forever on a collective whose peer died. A wait
// between streams is a cudaStreamWaitEvent plus a link in the waiting stream's error
// state (stream_error_state.h): no host callback on either stream.
#include "runtime/internal/cuda_stream_handle.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include "core/internal/cuda_check.h"
#include "runtime/internal/host_waits.h"
#include "zdp/dtype.h"  // format_bytes
#include "zdp/log.h"

namespace zdp {
namespace {

using cuda::StreamErrorState;

Status set_device(int index) {
  ZDP_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  return Status::Ok();
}

// Polls `query` (returning cudaErrorNotReady while busy) until it returns anything else or
// `timeout` passes: spinning (yielding the core) for the first 100 us, then sleeping 10 us,
// doubling up to 200 us. A wait for the tail of GPU work ends within microseconds of it,
// and a long wait costs little CPU. Sets *timed_out when the deadline passed, *blocked
// when the first query found the work unfinished (the host really waited).
template <typename Query>
cudaError_t poll_until_done(Query query, std::chrono::milliseconds timeout, bool* timed_out, bool* blocked) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  std::chrono::microseconds pause(10);
  *timed_out = false;
  *blocked = false;
  for (;;) {
    const cudaError_t err = query();
    if (err != cudaErrorNotReady) return err;
    *blocked = true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      *timed_out = true;
      return err;
    }
    if (now - start < std::chrono::microseconds(100)) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

class CudaDevice;

// What a host callback needs; owned by the callback, which deletes it.
struct HostTaskPayload {
  std::shared_ptr<StreamErrorState> state;
  uint64_t position = 0;
  std::string what;
  HostTask task;
};

// Runs on CUDA's callback thread, in stream order. Must not call the CUDA API.
void CUDART_CB run_host_task(void* data) {
  std::unique_ptr<HostTaskPayload> payload(static_cast<HostTaskPayload*>(data));
  if (!payload->state->error_before(payload->position).ok()) return;  // skipped: the stream failed earlier
  Status status;
  try {
    status = payload->task();
  } catch (const std::exception& e) {
    status = Status(StatusCode::kInternal,
                    "stream '" + payload->state->name() + "': task '" + payload->what + "' threw: " + e.what());
  } catch (...) {
    status = Status(StatusCode::kInternal,
                    "stream '" + payload->state->name() + "': task '" + payload->what + "' threw a non-exception");
  }
  if (!status.ok()) payload->state->fail(payload->position, status);
}

class CudaEvent final : public Event {
 public:
  CudaEvent(int device_index, cudaEvent_t event) : device_index_(device_index), event_(event) {}
  ~CudaEvent() override {
    // Safe while the event is pending: CUDA releases it once reached.
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(device_index_));
    ZDP_CUDA_CHECK_LOG(cudaEventDestroy(event_));
  }

  bool ready() override {
    (void)cudaSetDevice(device_index_);
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    if (err != cudaSuccess) (void)cudaGetLastError();  // a failure counts as "finished"; wait() reports it
    return true;
  }

  Status wait(std::chrono::milliseconds timeout) override {
    ZDP_RETURN_IF_ERROR(set_device(device_index_));
    bool timed_out = false, blocked = false;
    const Recorded rec = recorded();
    // A stream failure before the event (e.g. Stream::abort while a host task still blocks
    // the GPU stream) ends the wait at once: the failure is the answer.
    const cudaError_t err = poll_until_done(
        [this, &rec] {
          if (rec.state && !rec.state->error_before(rec.position).ok()) return cudaSuccess;
          return cudaEventQuery(event_);
        },
        timeout, &timed_out, &blocked);
    if (blocked) host_waits_detail::count_event_wait();
    const std::string where = rec.state ? " on stream '" + rec.state->name() + "'" : std::string();
    if (timed_out) {
      return Status(StatusCode::kTimeout, "event" + where + " not reached after " + std::to_string(timeout.count()) +
                                              " ms");
    }
    if (err != cudaSuccess) return cuda_error_status(err, "cudaEventQuery(event)", __FILE__, __LINE__);
    if (!rec.state) return Status::Ok();  // never recorded
    return rec.state->error_before(rec.position);
  }

  struct Recorded {
    std::shared_ptr<StreamErrorState> state;  // null until recorded
    uint64_t position = 0;                    // covers the stream's work below this position
  };

  Recorded recorded() const {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }
  void set_recorded(std::shared_ptr<StreamErrorState> state, uint64_t position) {
    std::lock_guard<std::mutex> lock(mu_);
    recorded_ = Recorded{std::move(state), position};
  }
  cudaEvent_t native() const { return event_; }
  int device_index() const { return device_index_; }

 private:
  const int device_index_;
  const cudaEvent_t event_;
  mutable std::mutex mu_;
  Recorded recorded_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(Device& device, std::string name, cudaStream_t stream)
      : device_(device), name_(std::move(name)), stream_(stream), state_(std::make_shared<StreamErrorState>(name_)) {}

  // Does not wait: CUDA finishes the enqueued work (and runs its host callbacks, which
  // hold their own reference to the error state) before releasing the stream.
  ~CudaStream() override {
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(device_.index()));
    ZDP_CUDA_CHECK_LOG(cudaStreamDestroy(stream_));
  }

  Device& device() override { return device_; }
  const std::string& name() const override { return name_; }

  Status enqueue_host(std::string what, HostTask task) override {
    if (!state_->error().ok()) return Status::Ok();  // skipped, as later work of a failed stream is
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    auto* payload = new HostTaskPayload{state_, state_->next_position(), std::move(what), std::move(task)};
    const cudaError_t err = cudaLaunchHostFunc(stream_, run_host_task, payload);
    if (err != cudaSuccess) {
      const uint64_t position = payload->position;
      const std::string task_name = payload->what;
      delete payload;
      return enqueue_failed(position, cuda_error_status(err, "cudaLaunchHostFunc(stream, run_host_task, payload)",
                                                        __FILE__, __LINE__),
                            "host task '" + task_name + "'");
    }
    return Status::Ok();
  }

  Status memcpy_async(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || !state_->error().ok()) return Status::Ok();
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    const uint64_t position = state_->next_position();
    const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_);
    if (err != cudaSuccess) {
      return enqueue_failed(
          position, cuda_error_status(err, "cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream)", __FILE__,
                                      __LINE__),
          "memcpy_async of " + format_bytes(static_cast<int64_t>(bytes)));
    }
    return Status::Ok();
  }

  Status memset_async(void* dst, int value, size_t bytes) override {
    if (bytes == 0 || !state_->error().ok()) return Status::Ok();
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    const uint64_t position = state_->next_position();
    const cudaError_t err = cudaMemsetAsync(dst, value, bytes, stream_);
    if (err != cudaSuccess) {
      return enqueue_failed(position,
                            cuda_error_status(err, "cudaMemsetAsync(dst, value, bytes, stream)", __FILE__, __LINE__),
                            "memset_async of " + format_bytes(static_cast<int64_t>(bytes)));
    }
    return Status::Ok();
  }

  Status record(Event& event) override {
    auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
    if (cuda_event == nullptr) {
      return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': record() of an event of another device");
    }
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    // The position is taken before the record so that the event covers everything
    // enqueued so far; concurrent enqueues from other threads are unordered anyway.
    const uint64_t position = state_->position();
    ZDP_CUDA_RETURN_IF_ERROR(cudaEventRecord(cuda_event->native(), stream_));
    cuda_event->set_recorded(state_, position);
    return Status::Ok();
  }

  Status wait(Event& event) override {
    auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
    if (cuda_event == nullptr) {
      return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': wait() on an event of another device");
    }
    const CudaEvent::Recorded rec = cuda_event->recorded();
    if (!rec.state) return Status::Ok();  // never recorded: nothing to wait for
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    ZDP_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, cuda_event->native(), 0));
    // The GPU-side wait carries no error: this stream's state links to the other's, so a
    // failure of the awaited work (recorded now or later, by a host task or the NCCL
    // watchdog) is this stream's failure from here on, found on the host side when this
    // stream is queried. No host callback on the critical path.
    state_->depend_on(rec.state, rec.position);
    return Status::Ok();
  }

  Status synchronize(std::chrono::milliseconds timeout) override {
    ZDP_RETURN_IF_ERROR(set_device(device_.index()));
    bool timed_out = false, blocked = false;
    const cudaError_t err = poll_until_done(
        [this] {
          if (!state_->error().ok()) return cudaSuccess;  // failed (or aborted): nothing to wait for
          return cudaStreamQuery(stream_);
        },
        timeout, &timed_out, &blocked);
    if (blocked) host_waits_detail::count_synchronize();
    if (timed_out) {
      return Status(StatusCode::kTimeout, "stream '" + name_ + "' on " + device_.name() + " still busy after " +
                                              std::to_string(timeout.count()) + " ms (synchronize)");
    }
    if (err != cudaSuccess) return cuda_error_status(err, "cudaStreamQuery(stream)", __FILE__, __LINE__);
    return state_->error();
  }

  Status error() override { return state_->error(); }
  void* native_handle() override { return stream_; }

  // Pinned at position 0: every event of this stream waited on afterwards reports the
  // abort, even one whose work had completed (an aborted stream is not to be trusted).
  void abort(const Status& reason) override { state_->fail(0, reason); }

  cuda::StreamHandle handle() const { return cuda::StreamHandle{stream_, device_.index(), state_}; }

 private:
  // An enqueue call failed: the stream's order is broken, so the stream fails at that
  // point (later work is skipped) and the caller hears about it at once too.
  Status enqueue_failed(uint64_t position, const Status& status, const std::string& what) {
    const Status s = status.with_context("stream '" + name_ + "' on " + device_.name() + ": " + what);
    state_->fail(position, s);
    return s;
  }

  Device& device_;
  const std::string name_;
  const cudaStream_t stream_;
  const std::shared_ptr<StreamErrorState> state_;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, std::string name) : index_(index), name_(std::move(name)) {}
  ~CudaDevice() override {
    if (copy_stream_ != nullptr) {
      ZDP_CUDA_CHECK_LOG(cudaSetDevice(index_));
      ZDP_CUDA_CHECK_LOG(cudaStreamDestroy(copy_stream_));
    }
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return index_; }
  std::string name() const override { return name_; }

  StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name, StreamPriority priority) override {
    ZDP_RETURN_IF_ERROR(set_device(index_));
    int least = 0, greatest = 0;  // numerically: greatest <= least
    ZDP_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t stream = nullptr;
    // Non-blocking: no implicit synchronisation with the legacy default stream, so
    // library calls on stream 0 cannot stall communication. High priority: the
    // scheduler starts its blocks first when both streams have work waiting.
    ZDP_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                                          priority == StreamPriority::kHigh ? greatest : least));
    return std::unique_ptr<Stream>(new CudaStream(*this, name, stream));
  }

  StatusOr<std::unique_ptr<Event>> create_event() override {
    ZDP_RETURN_IF_ERROR(set_device(index_));
    cudaEvent_t event = nullptr;
    ZDP_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return std::unique_ptr<Event>(new CudaEvent(index_, event));
  }

  // Not plain cudaMemcpy: from pageable host memory that returns once the data is staged,
  // before the DMA has landed, and work on our non-blocking streams could then read stale
  // memory. A private stream synchronised right away holds only this copy, so waiting on
  // it cannot hang behind a collective.
  Status memcpy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return Status::Ok();
    host_waits_detail::count_copy();
    ZDP_RETURN_IF_ERROR(set_device(index_));
    std::lock_guard<std::mutex> lock(copy_mu_);
    if (copy_stream_ == nullptr) {
      ZDP_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    }
    ZDP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy_stream_));
    ZDP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_stream_));
    return Status::Ok();
  }

 protected:
  StatusOr<void*> raw_allocate(int64_t bytes, MemSpace space) override {
    if (bytes <= 0) return static_cast<void*>(nullptr);
    ZDP_RETURN_IF_ERROR(set_device(index_));
    void* ptr = nullptr;
    const size_t size = static_cast<size_t>(bytes);
    const bool device = space == MemSpace::kDevice;
    const cudaError_t err = device ? cudaMalloc(&ptr, size) : cudaMallocHost(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it so later checks do not see it
      std::string message = std::string(device ? "cudaMalloc" : "cudaMallocHost") + " of " + format_bytes(bytes) +
                            " on " + name_ + " failed: " + cuda_error_text(err);
      size_t free_bytes = 0, total_bytes = 0;
      if (device && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        message += "; " + format_bytes(static_cast<int64_t>(free_bytes)) + " free of " +
                   format_bytes(static_cast<int64_t>(total_bytes));
      }
      return Status(StatusCode::kOutOfMemory, message + " at " + error_site(__FILE__, __LINE__));
    }
    if (err != cudaSuccess) {
      return cuda_error_status(err, device ? "cudaMalloc(&ptr, size)" : "cudaMallocHost(&ptr, size)", __FILE__,
                               __LINE__);
    }
    return ptr;
  }

  void raw_free(void* ptr, MemSpace space) override {
    if (ptr == nullptr) return;
    ZDP_CUDA_CHECK_LOG(cudaSetDevice(index_));
    if (space == MemSpace::kDevice) {
      ZDP_CUDA_CHECK_LOG(cudaFree(ptr));
    } else {
      ZDP_CUDA_CHECK_LOG(cudaFreeHost(ptr));
    }
  }

 private:
  const int index_;
  const std::string name_;
  std::mutex copy_mu_;
  cudaStream_t copy_stream_ = nullptr;  // created by the first memcpy()
};

}  // namespace

namespace cuda {

StatusOr<StreamHandle> stream_handle(Stream& stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(&stream);
  if (cuda_stream == nullptr) {
    return Status(StatusCode::kInvalidArgument,
                  "stream '" + stream.name() + "' is not a CUDA stream (it is on " + stream.device().name() + ")");
  }
  return cuda_stream->handle();
}

}  // namespace cuda

int cuda_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // No driver, no GPU, or a driver too old for this runtime: a machine without a
    // usable GPU, which is not an error for the caller.
    (void)cudaGetLastError();
    ZDP_LOG(kDebug) << "no usable CUDA device: cudaGetDeviceCount: " << cuda_error_text(err);
    return 0;
  }
  return count;
}

StatusOr<int64_t> cuda_device_memory(int index) {
  const int count = cuda_device_count();
  if (index < 0 || index >= count) {
    return Status(StatusCode::kNotFound, "cuda:" + std::to_string(index) + " requested, but " +
                                             std::to_string(count) + " CUDA device(s) are visible");
  }
  cudaDeviceProp props{};
  ZDP_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, index));
  return static_cast<int64_t>(props.totalGlobalMem);
}

StatusOr<std::unique_ptr<Device>> create_cuda_device(int index) {
  const int count = cuda_device_count();
  if (index < 0 || index >= count) {
    return Status(StatusCode::kNotFound, "cuda:" + std::to_string(index) + " requested, but " +
                                             std::to_string(count) + " CUDA device(s) are visible" +
                                             (count == 0 ? " (no GPU or no driver)" : ""));
  }
  ZDP_RETURN_IF_ERROR(set_device(index));
  cudaDeviceProp props{};
  ZDP_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, index));
  return std::unique_ptr<Device>(new CudaDevice(index, "cuda:" + std::to_string(index) + " (" + props.name + ")"));
}

}  // namespace zdp
