// Compressed communication on the CPU, side by side in one run: for each K it runs the
// same `dp-launch CONFIG` job (default configs/quickstart.toml at its stage) with
// zero.reduce_dtype = fp32, int8 and int4 (error feedback on), profiled, and prints the
// median step time, the bytes one rank sends per step as the profiler measured them,
// the held-out loss (the config's val_path; else the last training loss) and the ratios
// against fp32. "grad" is the gradient exchange alone; "sent" adds the parameter gathers
// (which stay in the compute dtype unless --gather int8).
//
//   compressed_bench [--config FILE] [--ranks 2,4] [--steps 60] [--reduce fp32,int8,int4] [--set KEY=VALUE ...]
//                    [--gather int8] [--compress all,inter-node] [--nodes 2] [--threads N] [--keep-logs]
//
// --nodes N runs each job as N dp-launch instances on this host (--node-rank 0..N-1, over
// 127.0.0.1), --ranks ranks each: what zero.compress = "inter-node" needs to have nodes.
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"compressed_bench: fp32 vs block-quantized gradient exchange, step time, bytes and loss"};
  std::string config = std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml", gather = "auto";
  std::vector<int> ranks = {2, 4};
  std::vector<std::string> reduces = {"fp32", "int8", "int4"};
  std::vector<std::string> scopes = {"all"};
  int steps = 60, threads = 0, nodes = 1;
  bool keep_logs = false;
  std::vector<std::string> extra;
  app.add_option("--config", config, "the dp-launch config to run");
  app.add_option("--set", extra, "KEY=VALUE config override for every run (e.g. optim.warmup_steps=0 for fewer steps "
                                 "than the config's warm-up)");
  app.add_option("--ranks", ranks, "rank counts K")->delimiter(',');
  app.add_option("--steps", steps, "optimizer steps per run")->check(CLI::Range(5, 100000));
  app.add_option("--reduce", reduces, "zero.reduce_dtype values, the first is the baseline")->delimiter(',');
  app.add_option("--gather", gather, "zero.gather_dtype of the quantized runs (auto | int8)");
  app.add_option("--compress", scopes, "zero.compress values of the quantized runs (all | inter-node)")
      ->delimiter(',');
  app.add_option("--nodes", nodes, "dp-launch instances (nodes) per job, --ranks ranks each")->check(CLI::Range(1, 16));
  app.add_option("--threads", threads, "OpenMP/OpenBLAS threads per rank; 0 = cores / K")->check(CLI::Range(0, 1024));
  app.add_flag("--keep-logs", keep_logs, "keep each run's logs");
  CLI11_PARSE(app, argc, argv);

  const fs::path root = fs::temp_directory_path() / ("zdp_compressed_bench_" + std::to_string(::getpid()));
  std::map<std::pair<int, std::string>, Result> results;
  bool failed = false;
  // The runs of each K: the baseline, then each quantized reduce under each compress scope.
  std::vector<std::pair<std::string, std::string>> variants;  // reduce, compress ("" for the baseline)
  std::vector<std::string> labels;
  for (const std::string& reduce : reduces) {
    for (const std::string& scope : reduce == reduces.front() ? std::vector<std::string>{""} : scopes) {
      variants.emplace_back(reduce, scope);
      labels.push_back(scope.empty() || (scopes.size() == 1 && scope == "all") ? reduce : reduce + "/" + scope);
    }
  }
  for (int k : ranks) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const std::string& reduce = variants[v].first;
      const std::string& label = labels[v];
      const fs::path dir = root / ("k" + std::to_string(k) + "-" + reduce + "-" + std::to_string(v));
      std::vector<std::string> sets = {
          "launch.nproc_per_node=" + std::to_string(k), "train.steps=" + std::to_string(steps),
          "train.log_every=" + std::to_string(steps), "train.eval_every=0", "checkpoint.dir=''", "checkpoint.every_steps=0",
          "zero.reduce_dtype=" + reduce, "profile.enabled=true", "profile.warmup_steps=2", "profile.trace=false",
          "profile.dir=" + (dir / "profile").string()};
      sets.insert(sets.end(), extra.begin(), extra.end());
      if (v > 0) {
        sets.push_back("zero.gather_dtype=" + gather);
        sets.push_back("zero.compress=" + variants[v].second);
      }
      if (threads > 0) {
        sets.push_back("launch.env.OMP_NUM_THREADS=" + std::to_string(threads));
        sets.push_back("launch.env.OPENBLAS_NUM_THREADS=" + std::to_string(threads));
      }
      const zdp::bench::Run r =
          zdp::bench::launch_run(ZDP_DP_LAUNCH, config, sets, dir, "K " + std::to_string(k) + ", " + label, nodes);
      if (!r.ok) {
        std::fprintf(stderr, "compressed_bench: %s\n", r.error.c_str());
        failed = true;
        continue;
      }
      Result res;
      res.step_ms = r.summary.at("step_time_s_median").get<double>() * 1e3;
      res.sent = zdp::bench::profile_summary_value(dir / "profile" / "profile.jsonl", "sent_bytes_per_step");
      res.grad = zdp::bench::profile_summary_value(dir / "profile" / "profile.jsonl", "sent_grad_bytes_per_step");
      res.held_out = r.summary.contains("eval_loss") && r.summary.at("eval_loss").is_number();
      res.loss = res.held_out ? r.summary.at("eval_loss").get<double>() : r.summary.at("final_loss").get<double>();
      results[{k, label}] = res;
    }
  }
  if (results.empty()) return 1;
  std::printf("# compressed_bench: %s, %d steps, %d node(s) x K ranks, gather_dtype %s in the quantized runs; sent = "
              "bytes per rank per step (profiler); loss = %s\n",
              config.c_str(), steps, nodes, gather.c_str(),
              results.begin()->second.held_out ? "held-out loss after the last step" : "last training loss");
  std::printf("# %3s %-15s %9s %10s %10s %9s | %9s %9s %9s %10s\n", "K", "reduce", "step ms", "grad KiB", "sent KiB",
              "loss", "time/base", "base/grad", "base/sent", "loss diff");
  std::string summary;
  for (int k : ranks) {
    auto base = results.find({k, labels.front()});
    for (const std::string& reduce : labels) {
      auto it = results.find({k, reduce});
      if (it == results.end()) continue;
      const Result& x = it->second;
      std::printf("  %3d %-15s %9.1f %10.1f %10.1f %9.4f", k, reduce.c_str(), x.step_ms, x.grad / 1024, x.sent / 1024,
                  x.loss);
      if (base != results.end()) {
        const Result& b = base->second;
        std::printf(" | %9.3f %9.2f %9.2f %9.2f%%", x.step_ms / b.step_ms, x.grad > 0 ? b.grad / x.grad : 0.0,
                    x.sent > 0 ? b.sent / x.sent : 0.0, 100.0 * (x.loss - b.loss) / b.loss);
        if (reduce != labels.front()) {
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
