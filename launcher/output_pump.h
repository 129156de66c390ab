// Moves every rank's output to the console (above its status line, terminal.h), each line
// prefixed "[rank r] ", and whole to log_dir/rank-r.log, keeping the last lines of each
// rank for failure reports.
// Single-threaded: the supervisor calls pump() in its loop.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/terminal.h"
#include "zdp/status.h"

namespace zdp::launcher {

class OutputPump {
 public:
  // A line longer than this (or output without newlines) is passed on in pieces.
  static constexpr size_t kMaxLine = 64 * 1024;
  // Bytes read from one rank per pump() call, so that a flood cannot hold the loop.
  static constexpr size_t kMaxReadPerPump = 1024 * 1024;

  // `console` receives prefixed lines; logs go to `log_dir` (created if missing).
  OutputPump(Terminal& console, std::string log_dir, size_t tail_lines = 20);
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Starts reading `fd` (non-blocking) for `rank`; appends to its log, starting with
  // `header` (e.g. "=== attempt 1 ==="). `fd` stays the caller's: the pump stops reading
  // it at end of file and never closes it. When the log cannot be opened (a file of that
  // name another user owns, a directory) kIoError says so, and `fd` is read all the same, its
  // lines on the console only.
  Status add(int rank, int fd, const std::string& header);
  // Reads what is available (at most kMaxReadPerPump bytes of each rank), waiting at most
  // `timeout` for something to arrive.
  void pump(std::chrono::milliseconds timeout);
  // True when every added pipe has reached end of file.
  bool drained() const;
  // The last lines `rank` printed (a partial last line included).
  std::vector<std::string> tail(int rank) const;
  std::string log_path(int rank) const;

 private:
  struct Source {
    int fd = -1;
    int log_fd = -1;
    bool log_failed = false;  // a write to the log failed (said once on the console)
    std::string partial;  // a line still waiting for its newline
    std::deque<std::string> tail;
  };
  void write_log(int rank, Source& src, const std::string& text);
  void emit_lines(int rank, Source& src, const std::vector<std::string_view>& lines);
  void read_from(int rank, Source& src);

  Terminal& console_;
  const std::string log_dir_;
  const size_t tail_lines_;
  std::map<int, Source> sources_;
};

// Writes all of `text` to the console `fd`, retrying short writes; a console that went
// away is ignored (the logs keep everything).
void write_all(int fd, const std::string& text);

}  // namespace zdp::launcher
