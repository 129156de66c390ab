// Devices: memory, streams and events behind one interface, so that engine code is
// written once for CPU and CUDA. Every allocation is accounted by category.
//
// CPU: a stream is a worker thread with a FIFO queue; an event is a completion flag.
// CUDA: streams and events are cudaStream_t / cudaEvent_t; host tasks run as
// cudaLaunchHostFunc callbacks. This header includes no CUDA header.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "zdp/device_kind.h"
#include "zdp/status.h"

namespace zdp {

// What an allocation is for; the profiler compares these against the ZeRO formula.
enum class MemCategory : int { kParams = 0, kGrads, kOptimizer, kBuckets, kWorkspace, kOther };
inline constexpr int kNumMemCategories = 6;
const char* to_string(MemCategory category);

// Where an allocation lives: device memory, or page-locked host memory (staging for
// copies and host-side collectives). On the CPU device both are ordinary host memory.
enum class MemSpace : int { kDevice = 0, kPinnedHost = 1 };
const char* to_string(MemSpace space);

struct MemoryCounters {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};

// Thread-safe current/peak byte counts per category of one memory space.
class MemoryAccounting {
 public:
  void on_alloc(MemCategory category, int64_t bytes);
  void on_free(MemCategory category, int64_t bytes);
  MemoryCounters category(MemCategory category) const;
  // current = sum over categories; peak = the highest that sum has been (not the sum of peaks).
  MemoryCounters total() const;
  // Sets every peak to its current value (e.g. at the start of a profiled step).
  void reset_peaks();

 private:
  mutable std::mutex mu_;
  std::array<MemoryCounters, kNumMemCategories> categories_{};
  MemoryCounters total_{};
};

class Device;

// Move-only owner of one accounted allocation; frees it (and updates the accounting)
// when destroyed. A zero-byte buffer has data() == nullptr. It frees through the Device
// it came from. REQUIRES: it goes before that Device does (its Context); one that
// outlives it leaks its memory with an error log instead of freeing through a destroyed
// device (a test that destroyed the device first crashed in its buffers' destructors on
// an H200; a trainer's own buffer held past its Context was a use-after-free).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  int64_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  MemSpace space() const { return space_; }
  bool empty() const { return ptr_ == nullptr; }
  // Frees the memory now.
  void reset();

 private:
  friend class Device;
  DeviceBuffer(Device* device, void* ptr, int64_t bytes, MemCategory category, MemSpace space);

  Device* device_ = nullptr;
  std::weak_ptr<const int> device_alive_;  // expires with the Device
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  MemCategory category_ = MemCategory::kOther;
  MemSpace space_ = MemSpace::kDevice;
};

// A point in a stream's work. Recorded on a stream; ready once everything enqueued on
// that stream before the record has finished.
class Event {
 public:
  virtual ~Event() = default;
  // True once the recorded work has finished (successfully or not). An event never
  // recorded is ready.
  virtual bool ready() = 0;
  // Waits until ready, at most `timeout`. Returns the first failure of the stream work
  // before the record, or kTimeout (the caller adds what it was waiting for).
  virtual Status wait(std::chrono::milliseconds timeout) = 0;
};

using HostTask = std::function<Status()>;

// A stream's scheduling priority. CUDA: kHigh is the device's greatest stream priority,
// so its kernels start first when both streams have work waiting (the engine's
// communication stream, whose collectives gate the other ranks); kNormal the default.
// The CPU device ignores it.
enum class StreamPriority { kNormal = 0, kHigh };

// An ordered queue of work on one device.
//
// Failure is sticky, like a CUDA context error: once a task fails, later work on the
// stream is skipped, error() returns that failure, and every event recorded afterwards
// reports it.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device& device() = 0;
  virtual const std::string& name() const = 0;
  // Runs `task` on the host after all earlier work of this stream and before later work.
  // `what` names the task in errors. CUDA: the task must not call the CUDA API (it runs
  // as a host callback) and should not block for long unless that is the point.
  virtual Status enqueue_host(std::string what, HostTask task) = 0;
  // Copies in any direction between device, pinned and ordinary host memory.
  virtual Status memcpy_async(void* dst, const void* src, size_t bytes) = 0;
  virtual Status memset_async(void* dst, int value, size_t bytes) = 0;
  // Marks `event` as the point after all work enqueued so far (re-recording moves it).
  virtual Status record(Event& event) = 0;
  // Later work of this stream starts only after `event` (recorded on any stream of the
  // same device) is ready; a failure before that event makes this stream fail too.
  virtual Status wait(Event& event) = 0;
  // Blocks until all enqueued work has finished; returns error() or kTimeout.
  virtual Status synchronize(std::chrono::milliseconds timeout) = 0;
  // The first failure of this stream's work, or OK.
  virtual Status error() = 0;
  // Fails the stream now with `reason` (unless it failed already): queued work is skipped
  // and whoever waits on its events or in synchronize() is released with the failure at
  // once, even while a host task is still running (that task ends on its own, e.g. at its
  // collective timeout). How a communicator abandons a collective blocked on a dead peer.
  virtual void abort(const Status& reason) = 0;
  // cudaStream_t on CUDA, nullptr on CPU.
  virtual void* native_handle() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual int index() const = 0;
  // "cpu" or "cuda:0 (NVIDIA H200)".
  virtual std::string name() const = 0;

  // Allocates `bytes` (64-byte aligned or better) accounted under `category`.
  // kOutOfMemory names the device, size, category and the bytes already in use.
  StatusOr<DeviceBuffer> allocate(int64_t bytes, MemCategory category, MemSpace space = MemSpace::kDevice);

  virtual StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name,
                                                          StreamPriority priority = StreamPriority::kNormal) = 0;
  virtual StatusOr<std::unique_ptr<Event>> create_event() = 0;
  // Synchronous copy in any direction.
  virtual Status memcpy(void* dst, const void* src, size_t bytes) = 0;

  MemoryAccounting& memory(MemSpace space = MemSpace::kDevice) { return memory_[static_cast<size_t>(space)]; }
  const MemoryAccounting& memory(MemSpace space = MemSpace::kDevice) const {
    return memory_[static_cast<size_t>(space)];
  }

 protected:
  virtual StatusOr<void*> raw_allocate(int64_t bytes, MemSpace space) = 0;
  virtual void raw_free(void* ptr, MemSpace space) = 0;

 private:
  friend class DeviceBuffer;
  void release(void* ptr, int64_t bytes, MemCategory category, MemSpace space);
  std::array<MemoryAccounting, 2> memory_{};
  std::shared_ptr<const int> alive_ = std::make_shared<const int>(0);  // its buffers' weak tokens
};

// The host device. Streams are worker threads.
std::unique_ptr<Device> create_cpu_device();

// Number of visible CUDA devices; 0 when built without CUDA or when no GPU is present.
int cuda_device_count();
// Total memory of CUDA device `index` in bytes (kUnavailable without CUDA, kNotFound for
// an index out of range).
StatusOr<int64_t> cuda_device_memory(int index);
// CUDA device `index` (made current on the calling thread). kUnavailable when this build
// has no CUDA, kNotFound when the index is out of range.
StatusOr<std::unique_ptr<Device>> create_cuda_device(int index);

}  // namespace zdp
