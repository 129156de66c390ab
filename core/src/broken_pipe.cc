// SIGPIPE caught by a handler that does nothing (broken_pipe.h).
#include "core/internal/broken_pipe.h"

#include <signal.h>

namespace zdp {
namespace {

void on_broken_pipe(int) {}  // the write that raised it returns EPIPE

}  // namespace

bool survive_broken_pipes() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0) return false;
  if (current.sa_handler != SIG_DFL) return true;  // the program's own choice stands
  struct sigaction quiet {};
  quiet.sa_handler = on_broken_pipe;
  sigemptyset(&quiet.sa_mask);
  quiet.sa_flags = SA_RESTART;  // other system calls go on as they would under SIG_IGN
  return ::sigaction(SIGPIPE, &quiet, nullptr) == 0;
}

}  // namespace zdp
