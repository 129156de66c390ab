// What `dp-launch scale` reads of each child run's train_summary.json
// (trainer/loop/run_summary.h writes it): the world size, stage, batch, steps and rates of
// one point of the series. The child is ours, but the file is on disk where anything may
// have written it, so it is bounded and validated before use: a mistyped or out-of-range
// field is refused naming the file and the key.
#pragma once

#include <string>

#include "planner/scale_report.h"
#include "zdp/status.h"

namespace zdp::launcher {

// kNotFound when `path` does not exist (did the run finish?), kInvalidArgument when it is
// not such a summary.
StatusOr<ScalePoint> read_run_summary(const std::string& path);

// The same for text already read (`path` names it in errors); tests/fuzz/run_summary_fuzz.cc.
StatusOr<ScalePoint> parse_run_summary(const std::string& text, const std::string& path);

}  // namespace zdp::launcher
