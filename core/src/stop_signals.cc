// install_stop_signals (stop_signals.h).
#include "core/internal/stop_signals.h"

namespace zdp {

void install_stop_signals(const struct sigaction& action, std::initializer_list<int> signals) {
  sigset_t installed;
  sigemptyset(&installed);
  for (const int sig : signals) {
    struct sigaction inherited {};
    const bool may_be_ignored = sig == SIGINT || sig == SIGHUP;
    if (may_be_ignored && ::sigaction(sig, nullptr, &inherited) == 0 && inherited.sa_handler == SIG_IGN) continue;
    if (::sigaction(sig, &action, nullptr) == 0) sigaddset(&installed, sig);
  }
  ::sigprocmask(SIG_UNBLOCK, &installed, nullptr);
}

}  // namespace zdp
