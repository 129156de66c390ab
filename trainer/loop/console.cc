// Console: plain lines, or a progress bar redrawn with \r on a terminal.
#include "trainer/loop/console.h"

#include <unistd.h>

#include "core/internal/live_terminal.h"
#include "runtime/internal/job_progress.h"

namespace zdp::trainer {

std::string si(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

Console::Console(std::FILE* out, bool enabled)
    : out_(out), enabled_(enabled), interactive_(enabled && is_live_terminal(::fileno(out))) {}

void Console::line(const std::string& text) {
  if (!enabled_) return;
  if (bar_shown_) std::fputs("\r\033[K", out_);  // clear the bar; it is redrawn below the line
  std::fprintf(out_, "%s\n", text.c_str());
  bar_shown_ = false;
  std::fflush(out_);
}

std::string Console::format(const StepLine& s) {
  char buf[256];
  int n = std::snprintf(buf, sizeof(buf), "step %lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %s tok/s | %s samples/s | %.1f ms",
                        static_cast<long long>(s.step), static_cast<long long>(s.steps), s.loss, s.lr, s.grad_norm,
                        si(s.tokens_per_s).c_str(), si(s.samples_per_s).c_str(), s.step_ms);
  std::string out = n > 0 ? buf : "";
  if (s.mfu >= 0) {
    std::snprintf(buf, sizeof(buf), " | MFU %.1f%%", 100.0 * s.mfu);
    out += buf;
  }
  if (s.eta_s >= 0) out += " | ETA " + format_eta(s.eta_s);
  return out;
}

void Console::progress(int64_t done, int64_t total, double eta_s, double last_loss) {
  if (!interactive_) return;
  constexpr int kWidth = 30;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  char loss[32] = "?";  // none read yet (a resumed run's first steps)
  if (last_loss >= 0) std::snprintf(loss, sizeof(loss), "%.4f", last_loss);
  std::fprintf(out_, "\r\033[K[%s] %lld/%lld loss %s ETA %s", bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total), loss, format_eta(eta_s).c_str());
  bar_shown_ = true;
  std::fflush(out_);
}

void Console::clear() {
  if (!bar_shown_) return;
  std::fputs("\r\033[K", out_);
  bar_shown_ = false;
  std::fflush(out_);
}

Console::~Console() { clear(); }

void Console::finish() {
  if (bar_shown_) std::fputs("\n", out_);
  bar_shown_ = false;
  std::fflush(out_);
}

}  // namespace zdp::trainer
