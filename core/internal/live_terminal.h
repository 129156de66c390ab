// Whether `fd` is a terminal that redraws a line in place (\r, ESC[K): a tty whose TERM is
// not "dumb" (Emacs' shell, some CI pseudo-terminals: the escapes show as text there).
// dp-launch's status line and dp-train's progress bar both ask it.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace zdp {

inline bool is_live_terminal(int fd) {
  const char* term = std::getenv("TERM");
  return ::isatty(fd) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

}  // namespace zdp
