// Rendezvous key-value store: how ranks meet (Gloo bootstrap, NCCL unique id) and report
// health. Values are byte strings. Implementations: TcpStoreClient (tcp_store.h),
// InMemoryStore (ranks as threads in tests), PrefixStore (a namespace inside another).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp {

class Store {
 public:
  virtual ~Store() = default;
  // Sets (or overwrites) `key`; wakes everyone waiting for it.
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Waits at most `timeout` for `key` to exist, then returns its value. kTimeout names the key.
  virtual StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer stored at `key` (absent = 0) and returns the
  // new value. kInvalidArgument when the key holds something that is not an integer.
  virtual StatusOr<int64_t> add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists. kTimeout lists the keys still missing.
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // True when every key exists right now (does not wait).
  virtual StatusOr<bool> check(const std::vector<std::string>& keys) = 0;
};

// Every key is "<prefix>/<key>" in the underlying store; errors show the keys unprefixed
// as the caller knows them, with the prefix named once.
class PrefixStore : public Store {
 public:
  // REQUIRES: `base` outlives this object.
  PrefixStore(std::string prefix, Store& base) : prefix_(std::move(prefix)), base_(base) {}
  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  StatusOr<bool> check(const std::vector<std::string>& keys) override;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;
  std::string prefix_;
  Store& base_;
};

// A store in this process's memory, shared by ranks that run as threads (fast tests).
class InMemoryStore : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  StatusOr<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  StatusOr<bool> check(const std::vector<std::string>& keys) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
};

// "Timed out after 30 s waiting for store keys: a, b (2 of 5 missing)": the one format
// used by every store for its timeouts.
Status store_timeout_error(const std::vector<std::string>& missing, size_t total_keys,
                           std::chrono::milliseconds timeout);

}  // namespace zdp
