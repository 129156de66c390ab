// One `dp-launch CONFIG --set ...` run for the benchmarks that time whole training jobs
// (compressed_bench, dp_train_bench): a free rendezvous port, the console to DIR/console.log,
// the run's train_summary.json read back.
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
// names the run in errors.
inline Run launch_run(const std::string& dp_launch, const std::string& config, std::vector<std::string> sets,
                      const std::filesystem::path& dir, const std::string& what) {
  namespace fs = std::filesystem;
  sets.push_back("launch.log_dir=" + (dir / "logs").string());
  sets.push_back("launch.master_port=" + std::to_string(free_port()));
  std::string cmd = quoted(dp_launch) + " " + quoted(config);
  for (const std::string& s : sets) cmd += " --set " + quoted(s);
  const fs::path console = dir / "console.log";
  fs::create_directories(dir);
  const int status = std::system((cmd + " > " + quoted(console.string()) + " 2>&1").c_str());
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

}  // namespace zdp::bench
