// A rank's heartbeat thread: publishes a HeartbeatRecord (runtime/internal/heartbeat.h)
// every interval through its own store connection (a request of the trainer's thread,
// such as a long wait, never delays it), and when a launcher marks the job failed,
// prints this rank's flight recorder before the launcher's SIGTERM arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/src/context/rank_progress.h"
#include "zdp/comm.h"
#include "zdp/launch_env.h"
#include "zdp/store.h"

namespace zdp::detail {

class HeartbeatPublisher {
 public:
  // Opens this rank's own connection to the job store of `env` (attempt-scoped) and
  // starts beating every heartbeat_interval(timeout).
  static StatusOr<std::unique_ptr<HeartbeatPublisher>> start(const LaunchEnv& env, std::chrono::milliseconds timeout,
                                                            std::shared_ptr<RankProgress> progress);

  // A new connection like the first (scoped to the attempt), for when that one breaks.
  using Reconnect = std::function<StatusOr<std::unique_ptr<Store>>()>;

  // REQUIRES: `store` is this rank's own connection, scoped to the attempt. When a request
  // fails other than by timing out (one transport timeout breaks a TCP store connection
  // for good), the thread says so and connects again with `reconnect`, every second until
  // it can: a healthy rank whose beats stopped would be declared stalled. Without
  // `reconnect` it stops beating, saying why.
  HeartbeatPublisher(std::unique_ptr<Store> store, int rank, std::chrono::milliseconds interval,
                     std::shared_ptr<RankProgress> progress, Reconnect reconnect = nullptr);
  ~HeartbeatPublisher();  // stops the thread (within ~0.1 s)
  HeartbeatPublisher(const HeartbeatPublisher&) = delete;
  HeartbeatPublisher& operator=(const HeartbeatPublisher&) = delete;

 private:
  void loop();
  void publish();
  void print_flight_record(const std::string& reason);
  // After a failed request: a new connection, retried every second until one works or
  // the publisher stops (false: stop, or no way to reconnect).
  bool reconnect_after(const Status& failure);

  std::unique_ptr<Store> store_;
  const int rank_;
  const std::chrono::milliseconds interval_;
  std::shared_ptr<RankProgress> progress_;
  Reconnect reconnect_;
  uint64_t beat_ = 0;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything it uses exists
};

}  // namespace zdp::detail
