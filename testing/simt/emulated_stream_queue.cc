// The emulated GPU's stream queues (emulated_stream_queue.h).
#include "testing/simt/emulated_stream_queue.h"

#include <vector>

#include "testing/simt/emulated_gpu_device.h"  // StreamOrder

namespace zdp::testing {
namespace {

// Every live queue of every emulated device, for the kOthersFirst order.
std::vector<std::weak_ptr<EmulatedQueue>> g_queues;
StreamOrder g_order = StreamOrder::kAlternate;
int64_t g_host_waits = 0;  // waits from the host, for kAlternate's parity
int g_depth = 0;           // > 0 while queued work runs (a wait inside it is no host wait)

}  // namespace

std::recursive_mutex& emulated_gpu_mutex() {
  static std::recursive_mutex mu;
  return mu;
}

bool EmulatedQueue::run_until(uint64_t position) {
  std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
  if (position <= executed_) return true;
  ++g_depth;
  if (g_depth == 1 && others_first()) run_others();
  const bool done = run_own(position);
  --g_depth;
  return done;
}

bool EmulatedQueue::others_first() {
  const int64_t n = g_host_waits++;
  return g_order == StreamOrder::kOthersFirst || (g_order == StreamOrder::kAlternate && n % 2 == 1);
}

void EmulatedQueue::run_others() {
  for (size_t i = 0; i < g_queues.size(); ++i) {
    std::shared_ptr<EmulatedQueue> q = g_queues[i].lock();
    if (q && q.get() != this) q->run_own(q->end());
  }
}

bool EmulatedQueue::run_own(uint64_t position) {
  if (running_) return executed_ >= position;  // a wait inside the running piece came back
  while (executed_ < position && !items_.empty()) {
    if (error_.ok()) {
      running_ = true;
      const std::optional<Status> s = items_.front()();
      running_ = false;
      if (!s) return false;
      if (!s->ok() && error_.ok()) {
        error_ = *s;
        failed_at_ = executed_;
      }
    }
    items_.pop_front();
    ++executed_;
  }
  return executed_ >= position;
}

std::shared_ptr<EmulatedQueue> make_queue(std::string name, int device) {
  auto queue = std::make_shared<EmulatedQueue>(std::move(name), device);
  std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
  g_queues.push_back(queue);
  return queue;
}

void finish_device_queues(int device) {
  for (;;) {
    bool done = true;
    {
      std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
      for (auto it = g_queues.begin(); it != g_queues.end();) {
        if (std::shared_ptr<EmulatedQueue> q = it->lock()) {
          if (q->device() == device) done = q->run_all() && done;
          ++it;
        } else {
          it = g_queues.erase(it);
        }
      }
    }
    if (done) return;
    std::this_thread::sleep_for(kPollInterval);
  }
}

void set_stream_order(StreamOrder order) {
  std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
  g_order = order;
}

}  // namespace zdp::testing
