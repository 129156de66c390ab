// The store pieces every implementation shares: the timeout message, PrefixStore, and
// InMemoryStore (ranks as threads; also the table behind the TCP store server).
#include "zdp/store.h"

#include <cstdint>
#include <cstdio>

#include "core/internal/parse_decimal.h"

namespace zdp {
namespace {

// A timeout of 1000 ranks must stay one readable line: spell out this many missing keys.
constexpr size_t kMaxKeysInTimeoutMessage = 16;
// Longer waits are treated as "forever": condition_variable::wait_until with a time point
// near time_point::max() overflows inside some standard libraries.
constexpr std::chrono::hours kForever{24 * 365};

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  if (timeout > kForever) timeout = kForever;
  return std::chrono::steady_clock::now() + timeout;
}

// Replaces every `from` in `text` with `to`.
std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit = text.find(from); hit != std::string::npos; hit = text.find(from, pos)) {
    out.append(text, pos, hit - pos).append(to);
    pos = hit + from.size();
  }
  return out.append(text, pos, std::string::npos);
}

// Status carries only text, so a base store's error is rewritten in place, with the prefix
// named once in front. Stores show a key either quoted (get("p/a")) or in the timeout
// list "waiting for store keys: p/a, p/b (2 of 3 missing)"; both lose the "p/".
Status unprefixed(const Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  const std::string context = "store prefix \"" + prefix + "\"";
  const std::string tag = prefix + "/";
  const std::string marker = "waiting for store keys: ";
  const std::string message = replace_all(status.message(), "\"" + tag, "\"");
  const size_t at = status.code() == StatusCode::kTimeout ? message.find(marker) : std::string::npos;
  if (at == std::string::npos) return Status(status.code(), message).with_context(context);
  std::string out = message.substr(0, at + marker.size());
  size_t pos = at + marker.size();
  while (true) {
    if (message.compare(pos, tag.size(), tag) == 0) pos += tag.size();
    const size_t comma = message.find(", ", pos);
    if (comma == std::string::npos) {
      out += message.substr(pos);
      break;
    }
    out += message.substr(pos, comma + 2 - pos);
    pos = comma + 2;
  }
  return Status(status.code(), out).with_context(context);
}

}  // namespace

Status store_timeout_error(const std::vector<std::string>& missing, size_t total_keys,
                           std::chrono::milliseconds timeout) {
  char seconds[64];
  std::snprintf(seconds, sizeof(seconds), "%.1f s", static_cast<double>(timeout.count()) / 1000.0);
  std::string message = std::string("timed out after ") + seconds + " waiting for store keys: ";
  for (size_t i = 0; i < missing.size() && i < kMaxKeysInTimeoutMessage; ++i) {
    if (i > 0) message += ", ";
    message += missing[i];
  }
  if (missing.size() > kMaxKeysInTimeoutMessage) message += ", ...";
  message += " (" + std::to_string(missing.size()) + " of " + std::to_string(total_keys) + " missing)";
  return Status(StatusCode::kTimeout, message);
}

// ---- PrefixStore ---------------------------------------------------------------------

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(full(key));
  return out;
}

Status PrefixStore::set(const std::string& key, const std::string& value) {
  return unprefixed(base_.set(full(key), value), prefix_);
}

StatusOr<std::string> PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  StatusOr<std::string> value = base_.get(full(key), timeout);
  if (!value.ok()) return unprefixed(value.status(), prefix_);
  return value;
}

StatusOr<int64_t> PrefixStore::add(const std::string& key, int64_t delta) {
  StatusOr<int64_t> value = base_.add(full(key), delta);
  if (!value.ok()) return unprefixed(value.status(), prefix_);
  return value;
}

Status PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return unprefixed(base_.wait(full(keys), timeout), prefix_);
}

StatusOr<bool> PrefixStore::check(const std::vector<std::string>& keys) {
  StatusOr<bool> present = base_.check(full(keys));
  if (!present.ok()) return unprefixed(present.status(), prefix_);
  return present;
}

// ---- InMemoryStore -------------------------------------------------------------------

Status InMemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
  return Status::Ok();
}

StatusOr<std::string> InMemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool present =
      changed_.wait_until(lock, deadline_after(timeout), [&] { return data_.count(key) > 0; });
  if (!present) return store_timeout_error({key}, 1, timeout);
  return data_.at(key);
}

StatusOr<int64_t> InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t current = 0;
    auto it = data_.find(key);
    if (it != data_.end() && !parse_decimal(it->second, INT64_MIN, INT64_MAX, &current)) {
      std::string shown = it->second.substr(0, 64);
      return Status(StatusCode::kInvalidArgument,
                    "add(\"" + key + "\"): the key holds \"" + shown + "\", which is not a decimal integer");
    }
    if (__builtin_add_overflow(current, delta, &result)) {
      return Status(StatusCode::kInvalidArgument, "add(\"" + key + "\"): " + std::to_string(current) + " + " +
                                                      std::to_string(delta) + " overflows int64");
    }
    data_[key] = std::to_string(result);
  }
  changed_.notify_all();
  return result;
}

Status InMemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    for (const std::string& key : keys) {
      if (data_.count(key) == 0) return false;
    }
    return true;
  };
  if (changed_.wait_until(lock, deadline_after(timeout), all_present)) return Status::Ok();
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (data_.count(key) == 0) missing.push_back(key);
  }
  return store_timeout_error(missing, keys.size(), timeout);
}

StatusOr<bool> InMemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& key : keys) {
    if (data_.count(key) == 0) return false;
  }
  return true;
}

}  // namespace zdp
