// The emulated CUDA device of the SIMT model tests: host memory, and streams whose work is
// queued and runs only when something waits for it.
#include "testing/simt/emulated_gpu_device.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/internal/address_sanitizer.h"
#include "runtime/internal/host_waits.h"
#include "zdp/dtype.h"  // format_bytes

namespace zdp::testing {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's

// Everything the emulated GPU runs, one piece at a time: the emulator is single-threaded,
// and queued work may be run by whichever thread waits for it.
std::recursive_mutex g_gpu_mu;

class Queue;
// Every live queue of every emulated device, for the kOthersFirst order.
std::vector<std::weak_ptr<Queue>> g_queues;
StreamOrder g_order = StreamOrder::kAlternate;
int64_t g_host_waits = 0;  // waits from the host, for kAlternate's parity
int g_depth = 0;           // > 0 while queued work runs (a wait inside it is no host wait)
// Every live allocation of every emulated device, start -> bytes (device and pinned memory:
// what a kernel may touch; see in_emulated_allocation).
std::map<uintptr_t, size_t> g_allocations;

// One stream's queue: its work in order, run only when something waits for it (the host,
// or another stream's queued wait), so that work nobody waited for has not happened yet:
// a read that no wait orders after the write it needs sees the old bytes.
class Queue {
 public:
  explicit Queue(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  // Queues `work`; the position it takes is end() before the call.
  void submit(std::function<Status()> work) {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    items_.push_back(std::move(work));
    ++submitted_;
  }
  // The position the next work takes: an event recorded now covers everything below it.
  uint64_t end() const {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    return submitted_;
  }
  // Runs the queued work below `position`, in order, first (by the StreamOrder of a wait
  // from the host) the other streams' queued work; after a failure the rest is skipped, as
  // on a failed CUDA stream.
  void run_until(uint64_t position) {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    if (position <= executed_) return;
    ++g_depth;
    if (g_depth == 1 && others_first()) run_others();
    run_own(position);
    --g_depth;
  }
  void run_all() { run_until(end()); }
  // The first failure of the work that has run, or OK.
  Status error() const {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    return error_;
  }
  // The failure of the work below `position` (an event recorded there reports it), or OK.
  Status error_before(uint64_t position) const {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    return failed_at_ < position ? error_ : Status::Ok();
  }
  // Fails the queue now: the work not yet run is skipped.
  void fail(const Status& reason) {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    if (!error_.ok()) return;
    error_ = reason;
    failed_at_ = executed_;
  }

 private:
  static bool others_first() {
    const int64_t n = g_host_waits++;
    return g_order == StreamOrder::kOthersFirst || (g_order == StreamOrder::kAlternate && n % 2 == 1);
  }
  // Every other queue's work, each as far as its own queued waits let it.
  void run_others() {
    for (size_t i = 0; i < g_queues.size(); ++i) {
      std::shared_ptr<Queue> q = g_queues[i].lock();
      if (q && q.get() != this) q->run_own(q->end());
    }
  }
  // This queue's work below `position`. A queued wait runs the other queue only up to work
  // submitted before the wait was, so it never comes back to unfinished work of this one
  // (as cudaStreamWaitEvent waits for the event's latest record before the call).
  void run_own(uint64_t position) {
    while (executed_ < position && !items_.empty()) {
      std::function<Status()> work = std::move(items_.front());
      items_.pop_front();
      if (error_.ok()) {
        const Status s = work();
        if (!s.ok() && error_.ok()) {
          error_ = s;
          failed_at_ = executed_;
        }
      }
      ++executed_;
    }
  }

  std::string name_;
  std::deque<std::function<Status()>> items_;
  uint64_t submitted_ = 0, executed_ = 0;
  Status error_;
  uint64_t failed_at_ = UINT64_MAX;
};

// A point in a queue. Waiting for it (ready(), wait()) runs the queue up to that point, as
// a GPU would have by the time the host asks; never recorded, it is ready.
class EmulatedEvent final : public Event {
 public:
  // Whether it is ready is only asked to wait for it: the queued work runs now, so the
  // answer is yes (a wait that finds the work done is no host wait, host_waits.h).
  bool ready() override {
    if (queue_) queue_->run_until(position_);
    return true;
  }
  Status wait(std::chrono::milliseconds) override {
    if (!queue_) return Status::Ok();
    queue_->run_until(position_);
    return queue_->error_before(position_);
  }
  void set(std::shared_ptr<Queue> queue, uint64_t position) {
    queue_ = std::move(queue);
    position_ = position;
  }
  const std::shared_ptr<Queue>& queue() const { return queue_; }
  uint64_t position() const { return position_; }

 private:
  std::shared_ptr<Queue> queue_;
  uint64_t position_ = 0;
};

class EmulatedGpuDevice;

// The Stream on a Queue; its cudaStream_t (native_handle) is the zdp_emu::StreamQueue the
// emulated launchers and cuBLASLt queue their work on.
class EmulatedStream final : public Stream, public ::zdp_emu::StreamQueue {
 public:
  EmulatedStream(EmulatedGpuDevice& device, std::shared_ptr<Queue> queue);
  // Queued work runs before the stream goes, as cudaStreamDestroy lets it finish.
  ~EmulatedStream() override { queue_->run_all(); }

  Device& device() override;
  const std::string& name() const override { return queue_->name(); }

  void submit(std::function<std::string()> work) override {
    const std::string name = queue_->name();
    queue_->submit([name, work = std::move(work)]() -> Status {
      const std::string why = work();
      return why.empty() ? Status::Ok() : Status(StatusCode::kCudaError, "stream '" + name + "': " + why);
    });
  }
  Status enqueue_host(std::string what, HostTask task) override {
    const std::string name = queue_->name();
    queue_->submit([name, what = std::move(what), task = std::move(task)]() -> Status {
      Status s = task();
      return s.ok() ? s : s.with_context("stream '" + name + "': " + what);
    });
    return Status::Ok();
  }
  Status memcpy_async(void* dst, const void* src, size_t bytes) override;
  Status memset_async(void* dst, int value, size_t bytes) override {
    if (bytes == 0) return Status::Ok();
    queue_->submit([=]() -> Status {
      std::memset(dst, value, bytes);
      return Status::Ok();
    });
    return Status::Ok();
  }
  Status record(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name() + "': an event of another device");
    e->set(queue_, queue_->end());
    return Status::Ok();
  }
  // cudaStreamWaitEvent: no host wait; this queue's later work runs after the event's.
  Status wait(Event& event) override {
    auto* e = dynamic_cast<EmulatedEvent*>(&event);
    if (e == nullptr) return Status(StatusCode::kInvalidArgument, "stream '" + name() + "': an event of another device");
    if (!e->queue()) return Status::Ok();  // never recorded: ready
    std::shared_ptr<Queue> other = e->queue();
    const uint64_t position = e->position();
    queue_->submit([other, position]() -> Status {
      other->run_until(position);
      return other->error_before(position);
    });
    return Status::Ok();
  }
  // The queued work runs now; finished by the time it is asked, it counts as no host wait.
  Status synchronize(std::chrono::milliseconds) override {
    queue_->run_all();
    return queue_->error();
  }
  Status error() override { return queue_->error(); }
  void abort(const Status& reason) override { queue_->fail(reason); }
  void* native_handle() override { return static_cast<::zdp_emu::StreamQueue*>(this); }

 private:
  EmulatedGpuDevice& device_;
  std::shared_ptr<Queue> queue_;
};

class EmulatedGpuDevice final : public Device {
 public:
  ~EmulatedGpuDevice() override { finish_all(); }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return 0; }
  std::string name() const override { return "cuda:0 (SIMT emulation)"; }

  StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name, StreamPriority) override {
    auto queue = std::make_shared<Queue>(name);
    {
      std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
      g_queues.push_back(queue);
    }
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
  StatusOr<void*> raw_allocate(int64_t bytes, MemSpace) override {
    void* ptr = allocate_exact_bytes(kAlignment, static_cast<size_t>(bytes));
    if (ptr == nullptr) {
      return Status(StatusCode::kOutOfMemory, "emulated GPU: host allocation of " + format_bytes(bytes) + " failed");
    }
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    g_allocations[reinterpret_cast<uintptr_t>(ptr)] = static_cast<size_t>(bytes);
    return ptr;
  }
  // cudaFree and cudaFreeHost wait for the whole device first; so does this.
  void raw_free(void* ptr, MemSpace) override {
    finish_all();
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    g_allocations.erase(reinterpret_cast<uintptr_t>(ptr));
    std::free(ptr);
  }

 private:
  // Every queue of the emulated GPU runs to its end (the queues of a device gone with it).
  static void finish_all() {
    std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
    for (auto it = g_queues.begin(); it != g_queues.end();) {
      if (std::shared_ptr<Queue> q = it->lock()) {
        q->run_all();
        ++it;
      } else {
        it = g_queues.erase(it);
      }
    }
  }
};

EmulatedStream::EmulatedStream(EmulatedGpuDevice& device, std::shared_ptr<Queue> queue)
    : device_(device), queue_(std::move(queue)) {}

Device& EmulatedStream::device() { return device_; }

// As cudaMemcpyAsync: from pageable host memory the bytes are staged at the call (the
// caller may reuse its buffer at once); to pageable host memory the call returns once the
// copy is done, so the queue runs up to it; between device and pinned memory the copy is
// queued.
Status EmulatedStream::memcpy_async(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
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
  if (!device_.owns(dst)) queue_->run_all();
  return Status::Ok();
}

}  // namespace

bool in_emulated_allocation(const void* p, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return false;
  --it;
  return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

void set_stream_order(StreamOrder order) {
  std::lock_guard<std::recursive_mutex> lock(g_gpu_mu);
  g_order = order;
}

std::unique_ptr<Device> create_emulated_gpu_device() { return std::make_unique<EmulatedGpuDevice>(); }

}  // namespace zdp::testing
