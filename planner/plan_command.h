// `dp-launch plan config.toml [--world 8,64] [--device-memory 80GiB] [--link GB/s,alpha_us]
// [--flops GFLOP/s] [--calibrate] [--gpu a100-80g|h100|h200 [--gpus-per-node 8] [--nodes N]]
// [--from-profile DIR [--baseline DIR0]]`: the CLI
// around plan_report.h. Starts no rank; prints the table and writes <launch.log_dir>/plan.jsonl.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zdp::launcher {

struct PlanArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::vector<int> worlds;
  std::string device_memory;  // "80GiB", "512MiB", "1.5TB", bytes
  std::string link;           // "GB/s,alpha_us", e.g. "100,10"
  double gflops = 0;          // one rank's sustained GFLOP/s
  bool calibrate = false;
  std::string gpu;            // --gpu h200: plan for that GPU (gpu_step_model.h) from any machine
  int gpus_per_node = 0;      // --gpus-per-node (with --gpu): 0 = the GPU table's (8)
  int nodes = 0;              // --nodes N (with --gpu): also plan N x gpus_per_node ranks
  std::string from_profile;   // --from-profile DIR: compare with a profiled GPU run (profile_compare.h)
  std::string baseline;       // --baseline DIR0 (with --from-profile): DIR against another run, region by region (profile_diff.h)
};

// Declares the subcommand's arguments on `cmd`.
void add_plan_options(CLI::App& cmd, PlanArgs& args);

// Exit code: 0, or 2 for a bad config or argument (named on stderr).
int run_plan(const PlanArgs& args);

// "80GiB" -> 85899345920; units B, KB/MB/GB/TB (powers of 1000) and KiB/MiB/GiB/TiB; a
// bare number is bytes. -1 for anything else: a sign, a space in front, hex, inf or nan,
// or more than 2^62 bytes.
int64_t parse_byte_size(const std::string& text);

}  // namespace zdp::launcher
