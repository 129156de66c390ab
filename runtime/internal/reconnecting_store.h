// A job-store connection that is made again when it breaks. One transport timeout (a
// network blip of a few seconds between a node and node 0) breaks a TCP store client for
// good: dp-launch could then no longer read the heartbeats or the job-failed key and
// stopped a healthy job as having lost its store, and a rank's heartbeat thread stopped,
// so that the rank was declared stalled. A request that finds the connection broken
// (kIoError) connects again (for up to `patience`) and runs once more: set, get, check and
// wait may run twice; add, which may not, is passed through after the reconnection
// without a retry.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zdp/store.h"

namespace zdp {

class ReconnectingStore final : public Store {
 public:
  // `connect(within)`: a new connection, giving up after `within`.
  using Connect = std::function<StatusOr<std::unique_ptr<Store>>(std::chrono::milliseconds within)>;

  // `who` names the connection in the warning ("dp-launch", "rank 3's heartbeat").
  ReconnectingStore(std::unique_ptr<Store> first, Connect connect, std::chrono::milliseconds patience,
                    std::string who);

  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  StatusOr<bool> check(const std::vector<std::string>& keys) override;

  int reconnections() const { return reconnections_; }

 private:
  // `request` on the current connection; when it fails other than by timing out, a new
  // connection and (when `retry`) the request once more. When that connection cannot be
  // made, the calls of the next `patience` fail at once with its error.
  template <typename T>
  T call(const std::function<T(Store&)>& request, bool retry);
  Status reconnect(const Status& failure);

  std::mutex mu_;
  std::unique_ptr<Store> store_;
  Connect connect_;
  const std::chrono::milliseconds patience_;
  const std::string who_;
  int reconnections_ = 0;
  // After a failed reconnection: its error, answered without another attempt until then.
  Status last_failure_ = Status::Ok();
  std::chrono::steady_clock::time_point retry_after_;
};

}  // namespace zdp
