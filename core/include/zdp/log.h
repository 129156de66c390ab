// Logging: every line starts with "[rank r/K host]" so that interleaved output of many
// ranks can be read and grepped. Level from ZDP_LOG_LEVEL (debug|info|warn|error).
#pragma once

#include <sstream>
#include <string>

namespace zdp {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Who this process is; set once by the runtime when the rank is known (zdp::init, or a
// communicator's creation). Before that a process is "rank 0/1". A process that is no
// rank (dp-launch) names its role instead, so that its lines are not taken for rank 0's.
struct ProcessIdentity {
  int rank = 0;
  int world_size = 1;
  std::string host;  // short host name
  std::string role;  // set_process_role's; empty for a rank
};
void set_process_identity(int rank, int world_size);
// "dp-launch node 1": the prefix says it in place of the rank.
void set_process_role(const std::string& role);
ProcessIdentity process_identity();

// "[rank 3/4 host]", or "[dp-launch node 1 host]" with a role
std::string log_prefix();

LogLevel log_threshold();
void set_log_threshold(LogLevel level);

// Writes one whole line to stderr (a single write(2) so lines of ranks never interleave).
void log_line(LogLevel level, const char* file, int line, const std::string& message);

namespace detail {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { log_line(level_, file_, line_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace detail
}  // namespace zdp

namespace zdp::detail {
// Turns `stream << ...` into void so the macro can be one expression (safe in an
// unbraced if/else, unlike an if-based macro).
struct LogVoidify {
  void operator&(std::ostream&) {}
};
}  // namespace zdp::detail

// ZDP_LOG(kInfo) << "bucket " << b << " ready";   (the stream is not evaluated below the threshold)
#define ZDP_LOG(level)                                          \
  (::zdp::LogLevel::level < ::zdp::log_threshold())             \
      ? (void)0                                                 \
      : ::zdp::detail::LogVoidify() &                           \
            ::zdp::detail::LogMessage(::zdp::LogLevel::level, __FILE__, __LINE__).stream()
