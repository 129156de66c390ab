// Terminal (terminal.h).
#include "launcher/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "launcher/output_pump.h"

namespace zdp::launcher {
namespace {

constexpr const char* kEraseLine = "\r\033[K";

}  // namespace

bool is_live_terminal(int fd) {
  const char* term = std::getenv("TERM");
  return ::isatty(fd) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

Terminal::Terminal(int fd, bool live) : fd_(fd), live_(live) {}

Terminal::~Terminal() { status(""); }

size_t Terminal::columns() const {
  winsize ws{};
  if (::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void Terminal::line(const std::string& text) {
  // One write: the erased status, the line, the status again (no flicker, no interleaving).
  write_all(fd_, status_.empty() ? text + "\n" : kEraseLine + text + "\n" + status_);
}

void Terminal::status(const std::string& text) {
  if (!live_) return;
  std::string cut = text.substr(0, columns() > 1 ? columns() - 1 : 0);  // the cursor's column stays free
  if (cut == status_) return;
  status_ = cut;
  write_all(fd_, kEraseLine + status_);
}

}  // namespace zdp::launcher
