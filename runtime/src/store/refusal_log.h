// Counting and rate-limited logging of the connections the store server refuses (wrong
// secret, no secret in time, oversized or malformed frames, too many connections). A
// flood of refusals must not flood the launcher's console: the first refusal of each
// interval is logged in full, the rest of the interval is counted and summed up in one
// line when it ends. Pure (the caller passes the time), so tests need no sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace zdp::tcp_store {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;

  // `name` starts every line ("store server :29500"); `interval`: at most one full line
  // and one summary line per interval.
  explicit RefusalLog(std::string name, std::chrono::milliseconds interval = std::chrono::seconds(10))
      : name_(std::move(name)), interval_(interval) {}

  // Counts one refusal of `peer` ("127.0.0.1:5555") for `reason` ("wrong job secret").
  // Logs it when it is the first of the interval.
  void refuse(const std::string& reason, const std::string& peer, Clock::time_point now);
  // Logs the summary of an interval that has ended with refusals left unlogged.
  void flush(Clock::time_point now);
  // When flush() next has something to do; Clock::time_point::max() when nothing.
  Clock::time_point next_flush() const;

  uint64_t total() const { return total_; }
  uint64_t count(const std::string& reason) const;
  uint64_t lines_logged() const { return lines_; }

 private:
  void log(const std::string& line);

  const std::string name_;
  const std::chrono::milliseconds interval_;
  uint64_t total_ = 0;
  uint64_t lines_ = 0;
  std::map<std::string, uint64_t> by_reason_;  // all time
  // The current interval: when it started, and what it refused without logging.
  bool open_ = false;
  Clock::time_point started_;
  std::map<std::string, uint64_t> unlogged_;
  uint64_t unlogged_total_ = 0;
  std::string last_peer_;
};

}  // namespace zdp::tcp_store
