// RefusalLog: one full line, then one summary line, per interval.
#include "runtime/src/store/refusal_log.h"

#include <cstdio>

#include "zdp/log.h"

namespace zdp::tcp_store {

void RefusalLog::refuse(const std::string& reason, const std::string& peer, Clock::time_point now) {
  ++total_;
  ++by_reason_[reason];
  flush(now);
  if (!open_) {
    open_ = true;
    started_ = now;
    log(name_ + ": refused " + peer + ": " + reason + " (further refusals are summed up every " +
        std::to_string(interval_.count() / 1000) + " s)");
    return;
  }
  ++unlogged_[reason];
  ++unlogged_total_;
  last_peer_ = peer;
}

void RefusalLog::flush(Clock::time_point now) {
  if (!open_ || now < started_ + interval_) return;
  open_ = false;
  if (unlogged_total_ == 0) return;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s",
                std::chrono::duration<double>(now - started_).count());
  std::string line = name_ + ": refused " + std::to_string(unlogged_total_) + " more connection(s) in the last " +
                     seconds + " (";
  bool first = true;
  for (const auto& [reason, n] : unlogged_) {
    line += (first ? "" : ", ") + std::to_string(n) + " " + reason;
    first = false;
  }
  line += "; the last from " + last_peer_ + "; " + std::to_string(total_) + " refused in all)";
  log(line);
  unlogged_.clear();
  unlogged_total_ = 0;
}

RefusalLog::Clock::time_point RefusalLog::next_flush() const {
  return open_ && unlogged_total_ > 0 ? started_ + interval_ : Clock::time_point::max();
}

uint64_t RefusalLog::count(const std::string& reason) const {
  const auto it = by_reason_.find(reason);
  return it == by_reason_.end() ? 0 : it->second;
}

void RefusalLog::log(const std::string& line) {
  ++lines_;
  ZDP_LOG(kWarn) << line;
}

}  // namespace zdp::tcp_store
