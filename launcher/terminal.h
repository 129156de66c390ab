// dp-launch's console: whole lines (the ranks' prefixed lines and the launcher's own)
// and, when it is a terminal, one live status line under them that is redrawn in place
// (carriage return and erase-line; cut to the terminal's width, so it never wraps). Every
// line printed clears the status line and draws it again below itself, so the ranks'
// output scrolls above it.
//
// The writes happen on a thread of the console's own, through a queue of at most
// kMaxQueuedBytes: a console nobody reads (`dp-launch ... | less` left unscrolled, a full
// pipe) blocked the supervisor in write(), which then answered no signal, rank exit or
// stall until the reader went away. Past the bound, lines are dropped (every one is in
// its rank's log) and a line says how many once the console drains.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "core/internal/live_terminal.h"  // is_live_terminal: whether to draw the status line

namespace zdp::launcher {

class Terminal {
 public:
  static constexpr size_t kMaxQueuedBytes = size_t{16} << 20;

  // `live`: draw the status line (the console is a terminal); otherwise status() does nothing.
  Terminal(int fd, bool live);
  // Leaves the terminal as it found it (the status line erased), after what is queued is
  // written, for at most 2 s: a console that is not read does not hold the exit.
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Prints `text` and a newline above the status line.
  void line(const std::string& text);
  // Replaces the status line with `text` (cut to the terminal's width); "" hides it.
  void status(const std::string& text);
  bool live() const { return live_; }
  // Lines dropped so far because the console was not read.
  size_t dropped() const;

 private:
  struct Queue;  // shared with the writer thread, which may outlive this object
  size_t columns() const;
  void enqueue(const std::string& bytes, bool is_line);

  const int fd_;
  const bool live_;
  std::string status_;  // as drawn
  std::shared_ptr<Queue> queue_;
};

}  // namespace zdp::launcher
