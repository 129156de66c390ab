// Compressed communication on the CPU, side by side in one run: for each K it runs the
// same `dp-launch CONFIG` job (default configs/quickstart.toml at its stage) with
// zero.reduce_dtype = fp32, int8 and int4 (error feedback on), profiled, and prints the
// median step time, the bytes one rank sends per step as the profiler measured them,
// the held-out loss (the config's val_path; else the last training loss) and the ratios
// against fp32. "grad" is the gradient exchange alone; "sent" adds the parameter gathers
// (which stay in the compute dtype unless --gather int8).
//
//   compressed_bench [--config FILE] [--ranks 2,4] [--steps 60] [--reduce fp32,int8,int4]
//                    [--gather int8] [--threads N] [--keep-logs]
//
// On one machine the "link" is loopback TCP through Gloo, so the step time shows what the
// extra quantize / dequantize passes cost against the bytes they save there; the bytes are
// what changes across real links (dp-launch plan prices them).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/dp_launch_run.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  double step_ms = 0;
  double sent = 0;   // bytes per rank per step (profile.jsonl's summary)
  double grad = 0;   // of them, the gradient exchange's
  double loss = 0;   // held-out if evaluated, else the last training loss
  bool held_out = false;
};

// profile.jsonl's summary line: `key` (bytes per rank per step), -1 when absent.
double summary_value(const fs::path& jsonl, const char* key) {
  std::ifstream in(jsonl);
  std::string line;
  double value = -1;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "summary") value = j.value(key, -1.0);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"compressed_bench: fp32 vs block-quantized gradient exchange, step time, bytes and loss"};
  std::string config = std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", gather = "auto";
  std::vector<int> ranks = {2, 4};
  std::vector<std::string> reduces = {"fp32", "int8", "int4"};
  int steps = 60, threads = 0;
  bool keep_logs = false;
  app.add_option("--config", config, "the dp-launch config to run");
  app.add_option("--ranks", ranks, "rank counts K")->delimiter(',');
  app.add_option("--steps", steps, "optimizer steps per run")->check(CLI::Range(5, 100000));
  app.add_option("--reduce", reduces, "zero.reduce_dtype values, the first is the baseline")->delimiter(',');
  app.add_option("--gather", gather, "zero.gather_dtype of the quantized runs (auto | int8)");
  app.add_option("--threads", threads, "OpenMP/OpenBLAS threads per rank; 0 = cores / K")->check(CLI::Range(0, 1024));
  app.add_flag("--keep-logs", keep_logs, "keep each run's logs");
  CLI11_PARSE(app, argc, argv);

  const fs::path root = fs::temp_directory_path() / ("zdp_compressed_bench_" + std::to_string(::getpid()));
  std::map<std::pair<int, std::string>, Result> results;
  bool failed = false;
  for (int k : ranks) {
    for (const std::string& reduce : reduces) {
      const fs::path dir = root / ("k" + std::to_string(k) + "-" + reduce);
      std::vector<std::string> sets = {
          "launch.nproc_per_node=" + std::to_string(k), "train.steps=" + std::to_string(steps),
          "train.log_every=" + std::to_string(steps), "train.eval_every=0", "checkpoint.dir=''", "checkpoint.every_steps=0",
          "zero.reduce_dtype=" + reduce, "profile.enabled=true", "profile.warmup_steps=2", "profile.trace=false",
          "profile.dir=" + (dir / "profile").string()};
      if (reduce != reduces.front()) sets.push_back("zero.gather_dtype=" + gather);
      if (threads > 0) {
        sets.push_back("launch.env.OMP_NUM_THREADS=" + std::to_string(threads));
        sets.push_back("launch.env.OPENBLAS_NUM_THREADS=" + std::to_string(threads));
      }
      const zdp::bench::Run r =
          zdp::bench::launch_run(ZDP_DP_LAUNCH, config, sets, dir, "K " + std::to_string(k) + ", " + reduce);
      if (!r.ok) {
        std::fprintf(stderr, "compressed_bench: %s\n", r.error.c_str());
        failed = true;
        continue;
      }
      Result res;
      res.step_ms = r.summary.at("step_time_s_median").get<double>() * 1e3;
      res.sent = summary_value(dir / "profile" / "profile.jsonl", "sent_bytes_per_step");
      res.grad = summary_value(dir / "profile" / "profile.jsonl", "sent_grad_bytes_per_step");
      res.held_out = r.summary.contains("eval_loss") && r.summary.at("eval_loss").is_number();
      res.loss = res.held_out ? r.summary.at("eval_loss").get<double>() : r.summary.at("final_loss").get<double>();
      results[{k, reduce}] = res;
    }
  }
  if (results.empty()) return 1;
  std::printf("# compressed_bench: %s, %d steps, gather_dtype %s in the quantized runs; sent = bytes per rank per "
              "step (profiler); loss = %s\n",
              config.c_str(), steps, gather.c_str(),
              results.begin()->second.held_out ? "held-out loss after the last step" : "last training loss");
  std::printf("# %3s %-6s %9s %10s %10s %9s | %9s %9s %9s %10s\n", "K", "reduce", "step ms", "grad KiB", "sent KiB",
              "loss", "time/base", "base/grad", "base/sent", "loss diff");
  std::string summary;
  for (int k : ranks) {
    auto base = results.find({k, reduces.front()});
    for (const std::string& reduce : reduces) {
      auto it = results.find({k, reduce});
      if (it == results.end()) continue;
      const Result& x = it->second;
      std::printf("  %3d %-6s %9.1f %10.1f %10.1f %9.4f", k, reduce.c_str(), x.step_ms, x.grad / 1024, x.sent / 1024,
                  x.loss);
      if (base != results.end()) {
        const Result& b = base->second;
        std::printf(" | %9.3f %9.2f %9.2f %9.2f%%", x.step_ms / b.step_ms, x.grad > 0 ? b.grad / x.grad : 0.0,
                    x.sent > 0 ? b.sent / x.sent : 0.0, 100.0 * (x.loss - b.loss) / b.loss);
        if (reduce != reduces.front()) {
          char cell[96];
          std::snprintf(cell, sizeof(cell), "%sK%d %s: grad bytes /%.2f, time x%.2f, loss %+.2f%%",
                        summary.empty() ? "" : "; ", k, reduce.c_str(), b.grad / x.grad, x.step_ms / b.step_ms,
                        100.0 * (x.loss - b.loss) / b.loss);
          summary += cell;
        }
      }
      std::printf("\n");
    }
  }
  std::printf("\nsummary: %s\n", summary.c_str());
  if (keep_logs || failed) {
    std::printf("logs: %s\n", root.c_str());
  } else {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  return failed ? 1 : 0;
}
