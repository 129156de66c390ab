// One `dp-launch CONFIG --set ...` run for the benchmarks that time whole training jobs
// (compressed_bench, dp_train_bench, compress_nodes_test): a free rendezvous port, the console
// to DIR/console.log, the run's train_summary.json read back.
#pragma once

#include <nlohmann/json.hpp>

#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/free_port.h"

namespace zdp::bench {

using zdp::testing::free_port;  // testing/free_port.h: the run's rendezvous store

inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Run {
  bool ok = false;
  std::string error;
  nlohmann::json summary;  // train_summary.json
};

// dp-launch `config` with `sets` plus a free port and launch.log_dir = DIR/logs. `what`
// names the run in errors. `nodes` > 1: that many dp-launch instances on this host, one
// per node (--node-rank, launch.nnodes, a job secret), meeting over 127.0.0.1 as the
// nodes of a multi-node job do (each rank learns its node from GROUP_RANK); the consoles
// go to DIR/console.log and DIR/console-node-N.log.
inline Run launch_run(const std::string& dp_launch, const std::string& config, std::vector<std::string> sets,
                      const std::filesystem::path& dir, const std::string& what, int nodes = 1) {
  namespace fs = std::filesystem;
  sets.push_back("launch.log_dir=" + (dir / "logs").string());
  sets.push_back("launch.master_port=" + std::to_string(free_port()));
  if (nodes > 1) sets.push_back("launch.nnodes=" + std::to_string(nodes));
  std::string cmd = quoted(dp_launch) + " " + quoted(config);
  for (const std::string& s : sets) cmd += " --set " + quoted(s);
  const fs::path console = dir / "console.log";
  fs::create_directories(dir);
  std::string line = cmd + " > " + quoted(console.string()) + " 2>&1";
  if (nodes > 1) {  // nodes 1.. in the background, node 0 here; the status is 0 only if all are
    std::string others, waits;
    for (int n = 1; n < nodes; ++n) {
      const std::string log = quoted((dir / ("console-node-" + std::to_string(n) + ".log")).string());
      others += cmd + " --node-rank " + std::to_string(n) + " > " + log + " 2>&1 & p" + std::to_string(n) + "=$!; ";
      waits += "wait $p" + std::to_string(n) + " || s=1; ";
    }
    line = "export ZDP_JOB_SECRET=zdp-bench-nodes-secret-0042; " + others + cmd + " --node-rank 0 > " +
           quoted(console.string()) + " 2>&1; s=$?; " + waits + "exit $s";
    line = "sh -c " + zdp::bench::quoted(line);
  }
  const int status = std::system(line.c_str());
  Run r;
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.error = what + ": dp-launch failed (status " + std::to_string(status) + "); see " + console.string() + "\n  " + cmd;
    return r;
  }
  std::ifstream in(dir / "logs" / "train_summary.json");
  if (!in) {
    r.error = what + ": no " + (dir / "logs" / "train_summary.json").string();
    return r;
  }
  try {
    r.summary = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    r.error = (dir / "logs" / "train_summary.json").string() + ": " + e.what();
    return r;
  }
  r.ok = true;
  return r;
}

// profile.jsonl's summary line: `key` (e.g. bytes per rank per step), -1 when absent.
inline double profile_summary_value(const std::filesystem::path& jsonl, const char* key) {
  std::ifstream in(jsonl);
  std::string line;
  double value = -1;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "summary") value = j.value(key, -1.0);
  }
  return value;
}

}  // namespace zdp::bench
