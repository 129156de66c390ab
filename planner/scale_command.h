// `dp-launch scale config.toml --world 1,2,4 [--steps N] [--set k=v]`: runs the job once
// per world size on this node, each with the config's per-rank micro-batch and
// accumulation (global batch = K x micro_batch x accum_steps) and its own log_dir
// (<log_dir>/scale/world-K), reads each run's train_summary.json and prints the scaling
// report (scale_report.h); JSON lines in <log_dir>/scale.jsonl.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zdp::launcher {

struct ScaleArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::vector<int> worlds;
  int64_t steps = 0;  // 0: the config's train.steps
};

void add_scale_options(CLI::App& cmd, ScaleArgs& args);

// Exit code: 0; 1 when a run failed (named, with its log_dir); 2 for a bad config or argument.
int run_scale(const ScaleArgs& args);

}  // namespace zdp::launcher
