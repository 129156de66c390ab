// The CPU device: host memory, streams as worker threads with a FIFO, events as
// completion flags that can be waited on with a timeout.
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

#include "core/internal/address_sanitizer.h"
#include "runtime/internal/host_waits.h"
#include "zdp/dtype.h"  // format_bytes
#include "zdp/device.h"

namespace zdp {
namespace {

constexpr size_t kCpuAlignment = 64;  // a cache line: SIMD loads and no false sharing

// Completion state shared by an event and the stream items that complete it.
struct CpuEventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;   // generation of the latest record()
  uint64_t completed = 0;  // generation of the latest record() that has been reached
  Status status;           // the recording stream's error when `completed` was reached
};

class CpuEvent final : public Event {
 public:
  bool ready() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->completed >= state_->recorded;
  }

  Status wait(std::chrono::milliseconds timeout) override {
    host_waits_detail::count_event_wait();
    return wait_uncounted(timeout);
  }

  std::shared_ptr<CpuEventState> state() const { return state_; }

  // wait() without counting it (synchronize() counts itself).
  Status wait_uncounted(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(state_->mu);
    const uint64_t target = state_->recorded;
    if (!state_->cv.wait_for(lock, timeout, [&] { return state_->completed >= target; })) {
      return Status(StatusCode::kTimeout, "event not reached after " + std::to_string(timeout.count()) + " ms");
    }
    return state_->status;
  }

 private:
  std::shared_ptr<CpuEventState> state_ = std::make_shared<CpuEventState>();
};

class CpuStream final : public Stream {
 public:
  CpuStream(Device& device, std::string name) : device_(device), name_(std::move(name)) {
    worker_ = std::thread([this] { run(); });
  }

  // Finishes the work already enqueued (a collective in flight ends by itself or by its
  // timeout), then stops the worker.
  ~CpuStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }

  Device& device() override { return device_; }
  const std::string& name() const override { return name_; }

  Status enqueue_host(std::string what, HostTask task) override {
    push(Item{std::move(what), std::move(task), /*runs_after_failure=*/false});
    return Status::Ok();
  }

  Status memcpy_async(void* dst, const void* src, size_t bytes) override {
    push(Item{"memcpy", [=] {
                if (bytes > 0) std::memcpy(dst, src, bytes);
                return Status::Ok();
              },
              false});
    return Status::Ok();
  }

  Status memset_async(void* dst, int value, size_t bytes) override {
    push(Item{"memset", [=] {
                if (bytes > 0) std::memset(dst, value, bytes);
                return Status::Ok();
              },
              false});
    return Status::Ok();
  }

  Status record(Event& event) override {
    auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
    if (cpu_event == nullptr) {
      return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': record() of an event of another device");
    }
    std::shared_ptr<CpuEventState> state = cpu_event->state();
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      generation = ++state->recorded;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_records_.emplace_back(state, generation);
    }
    // Runs even after a failure, to hand that failure to the event's waiters.
    push(Item{"record event", [this, state, generation] {
                complete(*state, generation, error());
                std::lock_guard<std::mutex> lock(mu_);
                for (auto it = pending_records_.begin(); it != pending_records_.end(); ++it) {
                  if (it->first == state && it->second == generation) {
                    pending_records_.erase(it);
                    break;
                  }
                }
                return Status::Ok();
              },
              true});
    return Status::Ok();
  }

  Status wait(Event& event) override {
    auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
    if (cpu_event == nullptr) {
      return Status(StatusCode::kInvalidArgument, "stream '" + name_ + "': wait() on an event of another device");
    }
    std::shared_ptr<CpuEventState> state = cpu_event->state();
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      target = state->recorded;
    }
    // No timeout of its own: the awaited work is bounded by its own timeouts (every
    // collective has one), and the stream's destructor still drains.
    push(Item{"wait for event", [state, target] {
                std::unique_lock<std::mutex> lock(state->mu);
                state->cv.wait(lock, [&] { return state->completed >= target; });
                return state->status;
              },
              false});
    return Status::Ok();
  }

  Status synchronize(std::chrono::milliseconds timeout) override {
    host_waits_detail::count_synchronize();
    CpuEvent done;
    ZDP_RETURN_IF_ERROR(record(done));
    Status s = done.wait_uncounted(timeout);
    // Not s.code(): a collective that timed out also reports kTimeout through the event.
    if (!done.ready()) {
      return Status(StatusCode::kTimeout, "stream '" + name_ + "' still busy after " +
                                              std::to_string(timeout.count()) + " ms (synchronize)");
    }
    return s;
  }

  Status error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  void* native_handle() override { return nullptr; }

  void abort(const Status& reason) override {
    std::vector<std::pair<std::shared_ptr<CpuEventState>, uint64_t>> pending;
    Status first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = reason;
      first = error_;
      pending.swap(pending_records_);
    }
    for (auto& [state, generation] : pending) complete(*state, generation, first);
  }

 private:
  // Marks `state` reached up to `generation` with `status` (an earlier completion by
  // abort() wins over the record item that arrives later).
  static void complete(CpuEventState& state, uint64_t generation, const Status& status) {
    {
      std::lock_guard<std::mutex> lock(state.mu);
      if (generation <= state.completed) return;
      state.completed = generation;
      state.status = status;
    }
    state.cv.notify_all();
  }

  struct Item {
    std::string what;
    HostTask task;
    bool runs_after_failure;
  };

  void push(Item item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(item));
    }
    work_cv_.notify_one();
  }

  void run() {
    for (;;) {
      Item item;
      bool failed;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        item = std::move(queue_.front());
        queue_.pop_front();
        failed = !error_.ok();
      }
      if (failed && !item.runs_after_failure) continue;  // skipped: the stream already failed
      Status status;
      try {
        status = item.task();
      } catch (const std::exception& e) {
        status = Status(StatusCode::kInternal, "stream '" + name_ + "': task '" + item.what + "' threw: " + e.what());
      }
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.ok()) error_ = status;
      }
    }
  }

  Device& device_;
  const std::string name_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  Status error_;
  // Event records enqueued but not yet reached: abort() releases their waiters.
  std::vector<std::pair<std::shared_ptr<CpuEventState>, uint64_t>> pending_records_;
  std::thread worker_;  // last: started after everything it uses exists
};

class CpuDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  int index() const override { return 0; }
  std::string name() const override { return "cpu"; }

  StatusOr<std::unique_ptr<Stream>> create_stream(const std::string& name, StreamPriority) override {
    return std::unique_ptr<Stream>(new CpuStream(*this, name));
  }
  StatusOr<std::unique_ptr<Event>> create_event() override { return std::unique_ptr<Event>(new CpuEvent()); }

  Status memcpy(void* dst, const void* src, size_t bytes) override {
    host_waits_detail::count_copy();  // a CUDA device's synchronous copy blocks the host
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }

 protected:
  // The rounding is the allocator's, not the caller's: a read past `bytes` is a bug (on a
  // GPU, past a cudaMalloc's end), so the sanitizer runs report it (allocate_exact_bytes).
  StatusOr<void*> raw_allocate(int64_t bytes, MemSpace) override {
    void* ptr = allocate_exact_bytes(kCpuAlignment, static_cast<size_t>(bytes));
    if (ptr == nullptr) {
      return Status(StatusCode::kOutOfMemory, "host allocation of " + format_bytes(bytes) + " failed");
    }
    return ptr;
  }
  void raw_free(void* ptr, MemSpace) override { std::free(ptr); }
};

}  // namespace

std::unique_ptr<Device> create_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace zdp
