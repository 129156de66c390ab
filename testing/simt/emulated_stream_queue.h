// The queues behind the emulated GPU's streams (emulated_gpu_device.h): each stream's work
// in order, run only when something waits for it, under one lock for the whole emulated
// GPU (the emulator is single-threaded, and queued work may be run by whichever thread
// waits for it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zdp/status.h"

namespace zdp::testing {

// Held while anything of the emulated GPU runs or changes (queues, the allocation map).
std::recursive_mutex& emulated_gpu_mutex();

// How long a host wait sleeps between polls of work that waits for another rank (a
// collective): the lock is free meanwhile, so other threads' streams and the NCCL
// watchdog's queries go on.
constexpr auto kPollInterval = std::chrono::microseconds(200);

// One piece of queued work: std::nullopt while unfinished (a collective whose peers have not
// all arrived), then its outcome.
using Work = std::function<std::optional<Status>()>;

// One stream's queue: its work in order, run only when something waits for it (the host,
// or another stream's queued wait), so that work nobody waited for has not happened yet:
// a read that no wait orders after the write it needs sees the old bytes.
class EmulatedQueue {
 public:
  EmulatedQueue(std::string name, int device) : name_(std::move(name)), device_(device) {}

  const std::string& name() const { return name_; }
  int device() const { return device_; }
  // Queues `work`, which finishes at its first run; the position it takes is end() before
  // the call.
  void submit(std::function<Status()> work) {
    submit_polled([work = std::move(work)]() -> std::optional<Status> { return work(); });
  }
  // Queues work that may take several runs to finish (Work).
  void submit_polled(Work work) {
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    items_.push_back(std::move(work));
    ++submitted_;
  }
  // The position the next work takes: an event recorded now covers everything below it.
  uint64_t end() const {
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    return submitted_;
  }
  // Runs the queued work below `position`, in order, first (by the StreamOrder of a wait
  // from the host) the other streams' queued work; after a failure the rest is skipped, as
  // on a failed CUDA stream. Returns whether all of it has run: false while a piece of it
  // is unfinished (Work), which the next call tries again.
  bool run_until(uint64_t position);
  bool run_all() { return run_until(end()); }
  // Runs the work below `position` to the end, polling unfinished work with the lock
  // released in between; false when `timeout` passed first.
  bool finish_until(uint64_t position, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!run_until(position)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
    return true;
  }
  // The first failure of the work that has run, or OK.
  Status error() const {
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    return error_;
  }
  // The failure of the work below `position` (an event recorded there reports it), or OK.
  Status error_before(uint64_t position) const {
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    return failed_at_ < position ? error_ : Status::Ok();
  }
  // Fails the queue now: the work not yet run is skipped.
  void fail(const Status& reason) {
    std::lock_guard<std::recursive_mutex> lock(emulated_gpu_mutex());
    if (!error_.ok()) return;
    error_ = reason;
    failed_at_ = executed_;
  }

 private:
  static bool others_first();
  // Every other queue's work, each as far as its own queued waits let it.
  void run_others();
  // This queue's work below `position`; false when a piece of it is unfinished. A queued
  // wait runs the other queue only up to work submitted before the wait was, so it never
  // comes back to unfinished work of this one (as cudaStreamWaitEvent waits for the event's
  // latest record before the call). The running piece stays first in the queue until it
  // finishes, so a wait that comes back to this queue finds it unfinished.
  bool run_own(uint64_t position);

  std::string name_;
  int device_;  // the index of the emulated device whose stream it is
  std::deque<Work> items_;
  uint64_t submitted_ = 0, executed_ = 0;
  bool running_ = false;
  Status error_;
  uint64_t failed_at_ = UINT64_MAX;
};

// A new queue for a stream of emulated device `device`, registered for the StreamOrder of
// host waits.
std::shared_ptr<EmulatedQueue> make_queue(std::string name, int device);
// Runs every queue of `device` to its end (cudaFree, the device's destruction), polling
// unfinished work with the lock released in between.
void finish_device_queues(int device);

}  // namespace zdp::testing
