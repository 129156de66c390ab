// A rank's heartbeat thread: publishes a HeartbeatRecord (runtime/internal/heartbeat.h)
// every interval through its own store connection (a request of the trainer's thread,
// such as a long wait, never delays it), and when a launcher marks the job failed,
// prints this rank's flight recorder before the launcher's SIGTERM arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
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

  // REQUIRES: `store` is this rank's own connection, scoped to the attempt (start()'s is
  // made again when it breaks: a ReconnectingStore). A request that fails other than by
  // timing out is said once and the thread tries again every second: it used to stop, and
  // a healthy rank whose beats stopped was declared stalled.
  HeartbeatPublisher(std::unique_ptr<Store> store, int rank, std::chrono::milliseconds interval,
                     std::shared_ptr<RankProgress> progress);
  ~HeartbeatPublisher();  // stops the thread (within ~0.1 s)
  HeartbeatPublisher(const HeartbeatPublisher&) = delete;
  HeartbeatPublisher& operator=(const HeartbeatPublisher&) = delete;

 private:
  void loop();
  void publish();
  void print_flight_record(const std::string& reason);

  std::unique_ptr<Store> store_;
  const int rank_;
  const std::chrono::milliseconds interval_;
  std::shared_ptr<RankProgress> progress_;
  uint64_t beat_ = 0;
  bool store_failed_ = false;  // the last request failed (said once)
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything it uses exists
};

}  // namespace zdp::detail
