// The signals that stop a supervising program (dp-launch, dp-launch scale) and how they
// are taken over from whoever started it. SIGINT and SIGHUP inherited as ignored stay
// ignored: that is how `nohup dp-launch ...` outlives its session and how a shell's
// background job `dp-launch ... &` ignores Ctrl-C. A signal inherited blocked is unblocked:
// a caller's mask (a Python harness that blocked SIGTERM) left the program deaf to its stop.
#pragma once

#include <signal.h>

#include <initializer_list>

namespace zdp {

// Installs `action` for each of `signals` (SIGINT and SIGHUP only where not inherited as
// ignored) and unblocks the ones it installed.
void install_stop_signals(const struct sigaction& action, std::initializer_list<int> signals);

}  // namespace zdp
