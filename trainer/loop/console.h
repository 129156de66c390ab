// dp-train's console output on rank 0: one plain line per logged step (what log files and
// dp-launch's [rank r] prefix want), or, on an interactive terminal, a progress bar with
// the ETA that is redrawn in place, with the logged lines printed above it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace zdp::trainer {

struct StepLine {
  int64_t step = 0, steps = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, samples_per_s = 0;
  double step_ms = 0;
  double mfu = -1;  // fraction of the GPU's peak; < 0 = unknown (CPU)
  double eta_s = -1;  // the rest of the run (EtaEstimator); < 0 = unknown
};

class Console {
 public:
  // Interactive when `out` is a live terminal (is_live_terminal: not TERM=dumb) and rank 0
  // prints at all.
  Console(std::FILE* out, bool enabled);
  // Erases the bar (a run that ends in an error leaves no bar for its message to follow).
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;
  // Prints a line (above the bar when there is one).
  void line(const std::string& text);
  // "step 20/200 | loss 2.3456 | lr 3.00e-04 | grad norm 1.234 | 12.3k tok/s | 45.6 ms | ETA 1m05s"
  static std::string format(const StepLine& s);
  // Redraws the progress bar: done/total steps and the ETA of the rest of the run.
  void progress(int64_t done, int64_t total, double eta_s, double last_loss);
  void finish();
  // Erases the bar until the next progress(): before a phase whose log lines (stderr, the
  // same terminal) would otherwise be written after it on its line (a checkpoint, an eval).
  void clear();
  bool interactive() const { return interactive_; }

 private:
  std::FILE* out_;
  bool enabled_;
  bool interactive_;
  bool bar_shown_ = false;
};

// "1.2k", "3.4M": a rate with an SI suffix.
std::string si(double value);

}  // namespace zdp::trainer
