// loss.svg, written by dp-train beside train_summary.json at the end of every run: the
// train loss per step and the held-out loss at each evaluation on the left axis, tokens/s
// on the right (plot/line_chart.h). A resumed run's picture starts at step 1 of the saved
// run, from the history its checkpoint carried (loss_history.h).
#pragma once

#include <string>

#include "trainer/loop/loss_history.h"

namespace zdp::trainer {

// `title`: what ran ("gpt, 366432 parameters, 2 ranks"); `resumed_at`: the step this run
// resumed at (0: from scratch), marked in the subtitle.
std::string loss_svg(const LossHistory& history, const std::string& title, int64_t resumed_at);

// <launch.log_dir>/loss.svg for `log_dir`.
std::string loss_svg_path(const std::string& log_dir);

}  // namespace zdp::trainer
