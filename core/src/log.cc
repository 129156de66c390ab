// Rank-prefixed logging to stderr, one write(2) per line.
#include "zdp/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace zdp {
namespace {

std::string short_host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  if (char* dot = std::strchr(buf, '.')) *dot = '\0';
  return buf;
}

LogLevel level_from_env() {
  const char* v = std::getenv("ZDP_LOG_LEVEL");
  if (!v) return LogLevel::kInfo;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));  // DEBUG, Warn
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  if (s != "info" && !s.empty()) {
    // Said at once (the logger is not set up yet): a misspelt level silently logged at info.
    std::fprintf(stderr, "[zdp] ZDP_LOG_LEVEL='%.32s' is not debug, info, warn or error: logging at info\n", v);
  }
  return LogLevel::kInfo;
}

struct IdentityState {
  std::mutex mu;
  ProcessIdentity id{0, 1, short_host_name(), ""};
};
IdentityState& identity_state() {
  static IdentityState* state = new IdentityState();  // never destroyed: usable in atexit paths
  return *state;
}

std::atomic<int> g_threshold{static_cast<int>(level_from_env())};

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}

}  // namespace

void set_process_identity(int rank, int world_size) {
  IdentityState& s = identity_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.id.rank = rank;
  s.id.world_size = world_size;
}

void set_process_role(const std::string& role) {
  IdentityState& s = identity_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.id.role = role;
}

ProcessIdentity process_identity() {
  IdentityState& s = identity_state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.id;
}

std::string log_prefix() {
  const ProcessIdentity id = process_identity();
  if (!id.role.empty()) return "[" + id.role + " " + id.host + "]";
  return "[rank " + std::to_string(id.rank) + "/" + std::to_string(id.world_size) + " " + id.host + "]";
}

LogLevel log_threshold() { return static_cast<LogLevel>(g_threshold.load(std::memory_order_relaxed)); }
void set_log_threshold(LogLevel level) { g_threshold.store(static_cast<int>(level)); }

void log_line(LogLevel level, const char* file, int line, const std::string& message) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  const char* base = std::strrchr(file, '/');
  std::string out = log_prefix() + " " + level_tag(level) + " " + stamp + " " + (base ? base + 1 : file) + ":" +
                    std::to_string(line) + "] " + message + "\n";
  // One write per line: lines of concurrent threads and processes stay whole.
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace zdp
