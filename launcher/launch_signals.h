// dp-launch's signals: what it takes over from whoever started it, and how a stop is
// counted. Ctrl-C, a kill, Ctrl-\ (SIGQUIT) and a closed terminal or ssh session (SIGHUP)
// stop the job; the first names the stop (exit 128 + it), and another one a second or more
// later makes the launcher SIGKILL the ranks at once (a second Ctrl-C). One within a second
// of the first is the same stop delivered twice: the terminal's Ctrl-C reaches `dp-launch
// scale` and the launcher it runs both, and scale passes it on; timeout(1) signals its
// child and then its group. Counted, it skipped the ranks' stop grace.
#pragma once

#include <atomic>

namespace zdp::launcher {

// Undone for every dp-launch command: SIGCHLD inherited as ignored (the kernel then reaps
// children itself and waitpid() never reports their exit: the launcher waited forever,
// plan --calibrate timed out after 120 s, and scale read a failed run as a success) or
// blocked.
void reset_inherited_signals();

// The launch's stop handlers (stop_signals.h: nohup's and a background job's ignored
// SIGHUP and SIGINT stay ignored, a blocked mask is undone), and SIGPIPE survived.
void install_signal_handlers();

// The first stop signal (0: none yet), as run_group reads it.
const std::atomic<int>& stop_signal();
bool interrupted();
// How many stop signals count (one within a second of the first does not).
int signals_received();

}  // namespace zdp::launcher
