// dp-launch's console: whole lines (the ranks' prefixed lines and the launcher's own)
// and, when it is a terminal, one live status line under them that is redrawn in place
// (carriage return and erase-line; cut to the terminal's width, so it never wraps). Every
// line printed clears the status line and draws it again below itself, so the ranks'
// output scrolls above it.
#pragma once

#include <string>

namespace zdp::launcher {

class Terminal {
 public:
  // `live`: draw the status line (the console is a terminal); otherwise status() does nothing.
  Terminal(int fd, bool live);
  ~Terminal();  // leaves the terminal as it found it: the status line erased
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Prints `text` and a newline above the status line.
  void line(const std::string& text);
  // Replaces the status line with `text` (cut to the terminal's width); "" hides it.
  void status(const std::string& text);
  bool live() const { return live_; }

 private:
  size_t columns() const;
  const int fd_;
  const bool live_;
  std::string status_;  // as drawn
};

// Whether `fd` is a terminal that can redraw a line (isatty, and TERM is not "dumb").
bool is_live_terminal(int fd);

}  // namespace zdp::launcher
