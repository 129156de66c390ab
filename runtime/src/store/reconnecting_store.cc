// ReconnectingStore (reconnecting_store.h).
#include "runtime/internal/reconnecting_store.h"

#include <type_traits>
#include <utility>

#include "zdp/log.h"

namespace zdp {
namespace {

template <typename T>
Status status_of(const T& result) {
  if constexpr (std::is_same_v<T, Status>) {
    return result;
  } else {
    return result.status();
  }
}

}  // namespace

ReconnectingStore::ReconnectingStore(std::unique_ptr<Store> first, Connect connect, std::chrono::milliseconds patience,
                                     std::string who)
    : store_(std::move(first)), connect_(std::move(connect)), patience_(patience), who_(std::move(who)) {}

Status ReconnectingStore::reconnect(const Status& failure) {
  ZDP_LOG(kWarn) << who_ << ": the job store connection failed (" << failure.message()
                 << "); connecting again (for up to " << patience_.count() / 1000 << " s)";
  StatusOr<std::unique_ptr<Store>> fresh = connect_(patience_);
  if (!fresh.ok()) {
    return Status(failure.code(), failure.message() + "; connecting again failed too: " + fresh.status().message());
  }
  store_ = std::move(*fresh);
  ++reconnections_;
  ZDP_LOG(kInfo) << who_ << ": connected to the job store again";
  return Status::Ok();
}

template <typename T>
T ReconnectingStore::call(const std::function<T(Store&)>& request, bool retry) {
  std::lock_guard<std::mutex> lock(mu_);
  T result = request(*store_);
  const Status s = status_of(result);
  // kIoError is what a broken connection answers (the request that broke it, by timing
  // out, answers kTimeout: the next one finds it broken).
  if (s.code() != StatusCode::kIoError) return result;
  // A reconnection that failed a moment ago is not tried again at once: a caller making
  // many requests (the launcher reads one heartbeat per rank) waited `patience` for each.
  const auto now = std::chrono::steady_clock::now();
  if (!last_failure_.ok() && now < retry_after_) return T(last_failure_);
  const Status again = reconnect(s);
  if (!again.ok()) {
    last_failure_ = again;
    retry_after_ = std::chrono::steady_clock::now() + patience_;
    return T(again);
  }
  last_failure_ = Status::Ok();
  return retry ? request(*store_) : result;
}

Status ReconnectingStore::set(const std::string& key, const std::string& value) {
  return call<Status>([&](Store& s) { return s.set(key, value); }, true);
}

StatusOr<std::string> ReconnectingStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return call<StatusOr<std::string>>([&](Store& s) { return s.get(key, timeout); }, true);
}

StatusOr<int64_t> ReconnectingStore::add(const std::string& key, int64_t delta) {
  return call<StatusOr<int64_t>>([&](Store& s) { return s.add(key, delta); }, false);
}

Status ReconnectingStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return call<Status>([&](Store& s) { return s.wait(keys, timeout); }, true);
}

StatusOr<bool> ReconnectingStore::check(const std::vector<std::string>& keys) {
  return call<StatusOr<bool>>([&](Store& s) { return s.check(keys); }, true);
}

}  // namespace zdp
