// Two-node jobs on one host (two dp-launch processes on loopback) for launcher tests:
// both launchers' outputs collected at once, and dp-launch's arguments for a two-node mlp
// job of dp-train. For test targets compiled with ZDP_DP_TRAIN and ZDP_SOURCE_DIR too.
#pragma once

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "testing/launcher_harness.h"

namespace zdp::testing {

// The job secret every node of a multi-node test job shares (dp-launch requires one).
inline const std::map<std::string, std::string> kTwoNodeSecret = {{"ZDP_JOB_SECRET", "test-secret-00042"}};

// Both launchers' outputs, each read on its own thread (a launcher blocks when its pipe
// is full and nobody reads it).
struct TwoNodes {
  std::future<LaunchRun> node0, node1;
};
inline TwoNodes finish_both(Launcher n0, Launcher n1, std::chrono::seconds limit) {
  const auto t0 = Clock::now();
  return {std::async(std::launch::async, [=] { return finish(n0, limit, t0); }),
          std::async(std::launch::async, [=] { return finish(n1, limit, t0); })};
}

// dp-launch's arguments for node `node` of a two-node mlp job of dp-train (one rank a
// node, no evaluation, no checkpoints saved), logs in `logs`, plus `sets` (--set k=v each).
inline std::vector<std::string> mlp_on_two_nodes(int node, const fs::path& logs, int port, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {std::string(ZDP_SOURCE_DIR) + "/configs/mlp-cpu.toml", "--node-rank",
                                   std::to_string(node)};
  for (const std::string& s :
       {std::string("launch.nnodes=2"), std::string("launch.nproc_per_node=1"),
        "launch.program=\"" + std::string(ZDP_DP_TRAIN) + "\"", "launch.log_dir=\"" + logs.string() + "\"",
        "launch.master_port=" + std::to_string(port), std::string("checkpoint.every_steps=0"),
        std::string("train.eval_every=0"), std::string("optim.warmup_steps=0")}) {
    args.insert(args.end(), {"--set", s});
  }
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return args;
}

}  // namespace zdp::testing
