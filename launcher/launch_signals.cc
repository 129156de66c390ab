// dp-launch's signal handling (launch_signals.h).
#include "launcher/launch_signals.h"

#include <signal.h>
#include <time.h>

#include <cstdint>

#include "core/internal/broken_pipe.h"
#include "core/internal/stop_signals.h"

namespace zdp::launcher {
namespace {

std::atomic<int> g_interrupt{0};
std::atomic<int> g_signals{0};
std::atomic<int64_t> g_first_signal_ns{0};

void on_signal(int sig) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  const int64_t ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  int none = 0;
  if (g_interrupt.compare_exchange_strong(none, sig)) {
    g_first_signal_ns.store(ns);
    g_signals.fetch_add(1);
  } else if (const int64_t first = g_first_signal_ns.load(); first != 0 && ns - first >= 1000000000) {
    g_signals.fetch_add(1);  // (0: the first's handler has not stamped it yet, so not a second later)
  }
}

}  // namespace

void reset_inherited_signals() {
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  ::sigprocmask(SIG_UNBLOCK, &child, nullptr);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  install_stop_signals(sa, {SIGINT, SIGTERM, SIGHUP, SIGQUIT});
  survive_broken_pipes();  // a closed terminal or pipe is an EPIPE, not the launcher's end
}

const std::atomic<int>& stop_signal() { return g_interrupt; }
bool interrupted() { return g_interrupt.load() != 0; }
int signals_received() { return g_signals.load(); }

}  // namespace zdp::launcher
