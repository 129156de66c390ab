// A process started with stdin, stdout or stderr closed (`prog 0<&-`, a daemon, some job
// schedulers) hands that number to the next descriptor it opens: dp-launch's lifeline pipe
// became fd 0, which each rank's stdin then replaced (ranks behind a wrapper outlived a
// SIGKILLed launcher), and a socket that became fd 1 or 2 would receive the log lines.
// Opening /dev/null on the missing ones first keeps every later descriptor above 2.
#pragma once

namespace zdp {

// Opens /dev/null on each of fds 0, 1 and 2 that is closed. Returns how many it opened
// (-1 when /dev/null cannot be opened).
int open_missing_standard_fds();

}  // namespace zdp
