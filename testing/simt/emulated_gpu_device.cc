// The emulated CUDA device of the SIMT model tests: host memory, streams that run their
// work when it is enqueued.
#include "testing/simt/emulated_gpu_device.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/internal/address_sanitizer.h"
#include "kernels/fused_attention.h"
#include "runtime/internal/host_waits.h"
#include "zdp/dtype.h"  // format_bytes

namespace zdp::testing {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's

// Ready from the start: the work before its record has run by the time record() returns.
// It carries the recording stream's failure, as a CUDA event carries its stream's error.
class EmulatedEvent final : public Event {
 public:
  bool ready() override { return true; }
  // Finished at the first query, so no host wait by the CUDA device's count (host_waits.h).
  Status wait(std::chrono::milliseconds) override { return status_; }
  void set_status(Status s) { status_ = std::move(s); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Work runs in the enqueuing thread, in the order of the calls; the first failure is
// sticky (the Stream contract): later work is skipped and reported as failed.
class EmulatedStream final : public Stream {
 public:
  EmulatedStream(Device& device, std::string name) : device_(device), name_(std::move(name)) {}

  Device& device() override { return device_; }
  const std::string& name() const override { return name_; }

  Status enqueue_host(std::string what, HostTask task) override {
    if (!error_.ok()) return Status::Ok();  // skipped, as on a failed stream
    Status s = task();
    if (!s.ok()) error_ = s.with_context("stream '" + name_ + "': " + what);
    return Status::Ok();
  }
  Status memcpy_async(void* dst, const void* src, size_t bytes) override {
    if (error_.ok() && bytes > 0) std::memmove(dst, src, bytes);
    return Status::Ok();
  }
  Status memset_async(void* dst, int value, size_t bytes) override {
    if (error_.ok() && bytes > 0) std::memset(dst, value, bytes);
    return Status::Ok();
  }
  Status record(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': an event of another device");
    e->set_status(error_);
    return Status::Ok();
  }
  Status wait(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': an event of another device");
    // A stream's wait is no host wait (cudaStreamWaitEvent): the event's failure, uncounted.
    if (!e->status().ok() && error_.ok()) error_ = e->status();
    return Status::Ok();
  }
  Status synchronize(std::chrono::milliseconds) override { return error_; }  // finished: not counted
  Status error() override { return error_; }
  void abort(const Status& reason) override {
    if (error_.ok()) error_ = reason;
  }
  void* native_handle() override { return nullptr; }  // the emulated launches' stream

 private:
  Device& device_;
  std::string name_;
  Status error_;
};

class EmulatedGpuDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return 0; }
  std::string name() const override { return "cuda:0 (SIMT emulation)"; }

  StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name, StreamPriority) override {
    return std::unique_ptr<Stream>(new EmulatedStream(*this, name));
  }
  StatusOr<std::unique_ptr<Event>> create_event() override { return std::unique_ptr<Event>(new EmulatedEvent()); }
  Status memcpy(void* dst, const void* src, size_t bytes) override {
    host_waits_detail::count_copy();  // as the CUDA device: every synchronous copy
    if (bytes > 0) std::memmove(dst, src, bytes);
    return Status::Ok();
  }

 protected:
  StatusOr<void*> raw_allocate(int64_t bytes, MemSpace) override {
    const size_t rounded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded > 0 ? rounded : kAlignment);
    if (ptr == nullptr) {
      return Status(StatusCode::kOutOfMemory, "emulated GPU: host allocation of " + format_bytes(bytes) + " failed");
    }
    poison_unused_bytes(static_cast<char*>(ptr) + bytes, rounded - static_cast<size_t>(bytes));
    return ptr;
  }
  void raw_free(void* ptr, MemSpace) override { std::free(ptr); }
};

}  // namespace

std::unique_ptr<Device> create_emulated_gpu_device() { return std::make_unique<EmulatedGpuDevice>(); }

}  // namespace zdp::testing

namespace zdp::kernels {

// The emulated GPU has no cuDNN (simt.h renames the query for the emulated sources): its
// attention runs as the batched GEMMs and the softmax kernels, which the emulation runs.
bool fused_attention_built() { return false; }

}  // namespace zdp::kernels
