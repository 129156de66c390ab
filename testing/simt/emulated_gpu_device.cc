// The emulated CUDA device of the SIMT model tests: host memory, and streams whose work is
// queued and runs only when something waits for it.
#include "testing/simt/emulated_gpu_device.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/internal/address_sanitizer.h"
#include "runtime/internal/cuda_stream_handle.h"
#include "runtime/internal/host_waits.h"
#include "testing/simt/emulated_stream_queue.h"
#include "zdp/dtype.h"  // format_bytes

namespace zdp::testing {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's

// Every live allocation of every emulated device, by start (device and pinned memory: what
// a kernel may touch; see in_emulated_allocation).
struct Allocation {
  size_t bytes = 0;
  EmulatedMemory kind = EmulatedMemory::kDevice;
  int device = 0;
};
std::map<uintptr_t, Allocation> g_allocations;

// A point in a queue, and in its stream's error state (the CUDA device's positions:
// runtime/internal/stream_error_state.h). Waiting for it (ready(), wait()) runs the queue
// up to that point, as a GPU would have by the time the host asks; never recorded, it is
// ready.
class EmulatedEvent final : public Event {
 public:
  // Whether it is ready is only asked to wait for it: the queued work runs now, so the
  // answer is yes (a wait that finds the work done is no host wait, host_waits.h), unless a
  // piece of it waits for another rank.
  bool ready() override { return !queue_ || failed() || queue_->run_until(position_); }
  Status wait(std::chrono::milliseconds timeout) override {
    if (!queue_) return Status::Ok();
    if (!failed() && !queue_->finish_until(position_, timeout)) {
      return Status(StatusCode::kTimeout, "event on stream '" + queue_->name() + "' not reached after " +
                                              std::to_string(timeout.count()) + " ms");
    }
    const Status queued = queue_->error_before(position_);
    return queued.ok() ? state_->error_before(state_position_) : queued;
  }
  void set(std::shared_ptr<EmulatedQueue> queue, uint64_t position, std::shared_ptr<cuda::StreamErrorState> state) {
    queue_ = std::move(queue);
    position_ = position;
    state_position_ = state->position();
    state_ = std::move(state);
  }
  const std::shared_ptr<EmulatedQueue>& queue() const { return queue_; }
  uint64_t position() const { return position_; }
  const std::shared_ptr<cuda::StreamErrorState>& state() const { return state_; }
  uint64_t state_position() const { return state_position_; }

 private:
  // As the CUDA device's wait: a failure of the stream before the event (a collective the
  // NCCL watchdog gave up on) is the answer, without waiting for the work.
  bool failed() const { return !state_->error_before(state_position_).ok(); }

  std::shared_ptr<EmulatedQueue> queue_;
  uint64_t position_ = 0;
  std::shared_ptr<cuda::StreamErrorState> state_;
  uint64_t state_position_ = 0;
};

class EmulatedGpuDevice;

// The Stream on a EmulatedQueue; its cudaStream_t (native_handle) is the zdp_emu::StreamQueue the
// emulated launchers and cuBLASLt queue their work on.
class EmulatedStream final : public Stream, public ::zdp_emu::StreamQueue {
 public:
  EmulatedStream(EmulatedGpuDevice& device, std::shared_ptr<EmulatedQueue> queue);
  // Queued work runs before the stream goes, as cudaStreamDestroy lets it finish (a
  // collective whose peers never come finishes when its communicator is aborted).
  ~EmulatedStream() override { (void)queue_->finish_until(queue_->end(), std::chrono::hours(24)); }

  Device& device() override;
  const std::string& name() const override { return queue_->name(); }

  void submit(std::function<std::string()> work) override {
    const std::string name = queue_->name();
    queue_->submit([name, work = std::move(work)]() -> Status {
      const std::string why = work();
      return why.empty() ? Status::Ok() : Status(StatusCode::kCudaError, "stream '" + name + "': " + why);
    });
  }
  void submit_polled(std::function<std::optional<std::string>()> poll) override {
    const std::string name = queue_->name();
    queue_->submit_polled([name, poll = std::move(poll)]() -> std::optional<Status> {
      const std::optional<std::string> why = poll();
      if (!why) return std::nullopt;
      return why->empty() ? Status::Ok() : Status(StatusCode::kCudaError, "stream '" + name + "': " + *why);
    });
  }
  std::function<bool()> mark() override {
    return [queue = queue_, position = queue_->end()] { return queue->run_until(position); };
  }

  // As the CUDA device's: skipped on a stream that failed before it, and a failure is the
  // stream's from the task's position on.
  Status enqueue_host(std::string what, HostTask task) override {
    if (!state_->error().ok()) return Status::Ok();
    const uint64_t position = state_->next_position();
    queue_->submit([state = state_, position, what = std::move(what), task = std::move(task)]() -> Status {
      if (!state->error_before(position).ok()) return Status::Ok();
      Status s = task();
      if (!s.ok()) state->fail(position, s.with_context("stream '" + state->name() + "': " + what));
      return Status::Ok();
    });
    return Status::Ok();
  }
  Status memcpy_async(void* dst, const void* src, size_t bytes) override;
  Status memset_async(void* dst, int value, size_t bytes) override {
    if (bytes == 0) return Status::Ok();
    (void)state_->next_position();
    queue_->submit([=]() -> Status {
      std::memset(dst, value, bytes);
      return Status::Ok();
    });
    return Status::Ok();
  }
  Status record(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name() + "': an event of another device");
    e->set(queue_, queue_->end(), state_);
    return Status::Ok();
  }
  // cudaStreamWaitEvent: no host wait; this queue's later work runs after the event's.
  Status wait(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name() + "': an event of another device");
    if (!e->queue()) return Status::Ok();  // never recorded: ready
    std::shared_ptr<EmulatedQueue> other = e->queue();
    const uint64_t position = e->position();
    queue_->submit_polled([other, position]() -> std::optional<Status> {
      if (!other->run_until(position)) return std::nullopt;
      return other->error_before(position);
    });
    state_->depend_on(e->state(), e->state_position());  // as the CUDA device's: failures travel
    return Status::Ok();
  }
  // The queued work runs now; finished by the time it is asked, it counts as no host wait.
  // Work that waits for another rank is polled until it finishes, the stream fails (as the
  // CUDA device's: nothing left to wait for), or `timeout` passes.
  Status synchronize(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (state_->error().ok() && !queue_->run_all()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status(StatusCode::kTimeout, "stream '" + name() + "': synchronize timed out after " +
                                                std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(kPollInterval);
    }
    return error();
  }
  Status error() override {
    const Status queued = queue_->error();
    return queued.ok() ? state_->error() : queued;
  }
  void abort(const Status& reason) override { queue_->fail(reason); }
  void* native_handle() override { return static_cast<::zdp_emu::StreamQueue*>(this); }
  // What the NCCL communicator needs of a CUDA stream (runtime/internal/cuda_stream_handle.h).
  cuda::StreamHandle handle();

 private:
  EmulatedGpuDevice& device_;
  std::shared_ptr<EmulatedQueue> queue_;
  std::shared_ptr<cuda::StreamErrorState> state_;
};

class EmulatedGpuDevice final : public Device {
 public:
  explicit EmulatedGpuDevice(int index) : index_(index) {}
  ~EmulatedGpuDevice() override { finish_all(); }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return index_; }
  std::string name() const override { return "cuda:" + std::to_string(index_) + " (SIMT emulation)"; }

  StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name, StreamPriority) override {
    std::shared_ptr<EmulatedQueue> queue = make_queue(name, index_);
    return std::unique_ptr<Stream>(new EmulatedStream(*this, std::move(queue)));
  }
  StatusOr<std::unique_ptr<Event>> create_event() override { return std::unique_ptr<Event>(new EmulatedEvent()); }
  // As the CUDA device's: a copy on a stream of its own, which waits for no other stream's
  // queued work (a read of a result nobody synchronized with sees the old bytes).
  Status memcpy(void* dst, const void* src, size_t bytes) override {
    host_waits_detail::count_copy();
    if (bytes > 0) std::memmove(dst, src, bytes);
    return Status::Ok();
  }
  // Whether `p` lies in an allocation of an emulated device (device or pinned memory), else
  // it is pageable host memory, which an async copy stages or waits for (memcpy_async).
  bool owns(const void* p) const { return in_emulated_allocation(p, 1); }

 protected:
  StatusOr<void*> raw_allocate(int64_t bytes, MemSpace space) override {
    void* ptr = allocate_exact_bytes(kAlignment, static_cast<size_t>(bytes));
    if (ptr == nullptr) {
      return Status(StatusCode::kOutOfMemory, "emulated GPU: host allocation of " + format_bytes(bytes) + " failed");
    }
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    g_allocations[reinterpret_cast<uintptr_t>(ptr)] =
        Allocation{static_cast<size_t>(bytes),
                   space == MemSpace::kDevice ? EmulatedMemory::kDevice : EmulatedMemory::kPinned, index_};
    return ptr;
  }
  // cudaFree and cudaFreeHost wait for the whole device first; so does this.
  void raw_free(void* ptr, MemSpace) override {
    finish_all();
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    g_allocations.erase(reinterpret_cast<uintptr_t>(ptr));
    std::free(ptr);
  }

 private:
  // Every queue of this device runs to its end, as cudaFree waits for its device (not for
  // another device, whose collective may be waiting for this rank's next one).
  void finish_all() { finish_device_queues(index_); }

  const int index_;
};

EmulatedStream::EmulatedStream(EmulatedGpuDevice& device, std::shared_ptr<EmulatedQueue> queue)
    : device_(device), queue_(std::move(queue)), state_(std::make_shared<cuda::StreamErrorState>(queue_->name())) {}

Device& EmulatedStream::device() { return device_; }

cuda::StreamHandle EmulatedStream::handle() { 
  return cuda::StreamHandle{static_cast<cudaStream_t>(native_handle()), device_.index(), state_};
}

// As cudaMemcpyAsync: from pageable host memory the bytes are staged at the call (the
// caller may reuse its buffer at once); to pageable host memory the call returns once the
// copy is done, so the queue runs up to it; between device and pinned memory the copy is
// queued.
Status EmulatedStream::memcpy_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  (void)state_->next_position();
  if (!device_.owns(src)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    queue_->submit([dst, staged]() -> Status {
      std::memcpy(dst, staged->data(), staged->size());
      return Status::Ok();
    });
  } else {
    queue_->submit([=]() -> Status {
      std::memmove(dst, src, bytes);
      return Status::Ok();
    });
  }
  // Until the copy is done, also when work before it waits for another rank (the host
  // buffer may go as soon as this returns; a collective whose peer died ends when its
  // communicator is aborted).
  if (!device_.owns(dst)) (void)queue_->finish_until(queue_->end(), std::chrono::hours(24));
  return Status::Ok();
}

}  // namespace

namespace {

// The live allocation holding [p, p + bytes), or null. REQUIRES: emulated_gpu_mutex() held.
const Allocation* find_allocation(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  const size_t offset = a - it->first;
  return offset <= it->second.bytes && bytes <= it->second.bytes - offset ? &it->second : nullptr;
}

}  // namespace

bool in_emulated_allocation(const void* p, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
  return find_allocation(p, bytes) != nullptr;
}

EmulatedMemory emulated_memory_kind(const void* p, int* device) {
  std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
  const Allocation* a = find_allocation(p, 1);
  if (a == nullptr) return EmulatedMemory::kNone;
  if (device != nullptr) *device = a->device;
  return a->kind;
}

std::unique_ptr<Device> create_emulated_gpu_device(int index) { return std::make_unique<EmulatedGpuDevice>(index); }

}  // namespace zdp::testing

namespace zdp::cuda {

StatusOr<StreamHandle> stream_handle(Stream& stream) {
  auto* emulated = dynamic_cast<testing::EmulatedStream*>(&stream);
  if (emulated == nullptr) {
    return Status(StatusCode::kInvalidArgument, "stream '" + stream.name() + "' is not a stream of the emulated GPU (it is on " +
                                                    stream.device().name() + ")");
  }
  return emulated->handle();
}

}  // namespace zdp::cuda
