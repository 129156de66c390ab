// dp-train throughput on the CPU per ZeRO stage at K = 1 and 2 ranks, side by side in one
// run: for each (stage, K) it runs the real `dp-launch CONFIG` (default
// configs/quickstart.toml, the 366k-parameter GPT) with --set overrides for the stage, the
// rank count, synthetic tokens and a short run, and reads the run's train_summary.json.
//
//   dp_train_bench [--config FILE] [--stages 0,1,2,3] [--ranks 1,2] [--steps 20] [--threads N]
//                  [--keep-logs] [--deterministic] [--set KEY=VALUE ...]
//
// --set passes config overrides to every run (e.g. the 19M-parameter MLP of the README:
// --config configs/mlp-cpu.toml --set model.n_layers=4 --set model.d_model=2176).
//
// --deterministic also runs every (stage, K) twice more, profiled, without and with
// train.deterministic = true, and prints both step times, their ratio and the bytes one
// rank sends per step (the profiler's sent_bytes_per_step) side by side. Both sides of
// that table carry the profiler's (small) cost; the first table is unprofiled.
//
// Every K trains the config's global batch (accum_steps = global / (K x micro_batch)), so
// a row compares the same work and K = 1 and 2 end at the same loss up to float summation
// order (the "loss" columns). tok/s = tokens per step / the median step time after 2
// warm-up steps (evaluation excluded). Each rank gets cores / K OpenMP/OpenBLAS threads
// (dp-launch's rule), or --threads N each: on a machine whose cores are busy with other
// work, a multi-threaded rank's OpenMP team waits for descheduled threads at every
// barrier, and --threads 1 compares K = 1 and 2 without that effect.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bench/dp_launch_run.h"

namespace {

namespace fs = std::filesystem;

using zdp::bench::Run;  // bench/dp_launch_run.h

// One dp-launch run; its console output goes to DIR/console.log.
Run launch(const std::string& config, const std::vector<std::string>& extra, int stage, int ranks, int steps,
           int threads, bool deterministic, bool profiled, const fs::path& dir) {
  std::vector<std::string> sets = {
      "zero.stage=" + std::to_string(stage), "launch.nproc_per_node=" + std::to_string(ranks),
      "data.kind=synthetic", "train.steps=" + std::to_string(steps), "optim.warmup_steps=0",
      "train.log_every=" + std::to_string(steps), "train.eval_every=0", "train.eval_samples=8",
      "checkpoint.every_steps=0", "checkpoint.dir=\"\"",  // never resume from another run's checkpoint
      std::string("train.deterministic=") + (deterministic ? "true" : "false")};
  sets.insert(sets.end(), extra.begin(), extra.end());
  if (profiled) {
    for (const char* s : {"profile.enabled=true", "profile.warmup_steps=2", "profile.trace=false"}) sets.push_back(s);
    sets.push_back("profile.dir=" + (dir / "profile").string());
  }
  if (threads > 0) {
    sets.push_back("launch.env.OMP_NUM_THREADS=" + std::to_string(threads));
    sets.push_back("launch.env.OPENBLAS_NUM_THREADS=" + std::to_string(threads));
  }
  // launch_run adds launch.log_dir = DIR/logs and a free launch.master_port.
  return zdp::bench::launch_run(ZDP_DP_LAUNCH, config, std::move(sets), dir,
                                "stage " + std::to_string(stage) + ", " + std::to_string(ranks) + " rank(s)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dp_train_bench: dp-train tokens/s and step time per ZeRO stage at K = 1 and 2 CPU ranks"};
  std::string config = std::string(ZDP_SOURCE_DIR) + "/configs/quickstart.toml";
  std::vector<int> stages = {0, 1, 2, 3}, ranks = {1, 2};
  int steps = 20, threads = 0;
  bool keep_logs = false, deterministic = false;
  std::vector<std::string> extra;
  app.add_option("--config", config, "the dp-launch config to run (data is replaced by synthetic tokens)");
  app.add_option("--stages", stages, "ZeRO stages")->delimiter(',');
  app.add_option("--ranks", ranks, "rank counts K, side by side")->delimiter(',');
  app.add_option("--steps", steps, "optimizer steps per run (the first 2 are not timed)")->check(CLI::Range(3, 100000));
  app.add_option("--threads", threads, "OpenMP/OpenBLAS threads per rank; 0 = cores / K (dp-launch's rule)")
      ->check(CLI::Range(0, 1024));
  app.add_flag("--keep-logs", keep_logs, "keep each run's console log and train_summary.json");
  app.add_flag("--deterministic", deterministic, "also run each with train.deterministic = true and compare step times");
  app.add_option("--set", extra, "a config override KEY=VALUE for every run (repeatable)");
  CLI11_PARSE(app, argc, argv);

  const fs::path root = fs::temp_directory_path() / ("zdp_dp_train_bench_" + std::to_string(::getpid()));
  std::map<std::pair<int, int>, nlohmann::json> results;  // (stage, K) -> summary
  // --deterministic: (stage, K) -> the profiled default and deterministic runs' step time
  // and bytes sent per rank per step.
  struct Pair {
    double ms[2] = {0, 0}, sent[2] = {-1, -1};
    bool ok[2] = {false, false};
  };
  std::map<std::pair<int, int>, Pair> det_pairs;
  bool failed = false;
  for (int stage : stages) {
    for (int k : ranks) {
      const std::string name = "stage" + std::to_string(stage) + "-k" + std::to_string(k);
      const Run r = launch(config, extra, stage, k, steps, threads, false, false, root / name);
      if (r.ok) results[{stage, k}] = r.summary;
      if (!r.ok) std::fprintf(stderr, "dp_train_bench: %s\n", r.error.c_str());
      failed |= !r.ok;
      if (!deterministic) continue;
      for (int det = 0; det < 2; ++det) {  // interleaved: a slow spell of the machine hits both
        const fs::path dir = root / (name + (det ? "-det" : "-profiled"));
        const Run p = launch(config, extra, stage, k, steps, threads, det == 1, true, dir);
        if (!p.ok) std::fprintf(stderr, "dp_train_bench: %s\n", p.error.c_str());
        failed |= !p.ok;
        if (!p.ok) continue;
        Pair& pair = det_pairs[{stage, k}];
        pair.ok[det] = true;
        pair.ms[det] = p.summary.at("step_time_s_median").get<double>() * 1e3;
        pair.sent[det] = zdp::bench::profile_summary_value(dir / "profile" / "profile.jsonl", "sent_bytes_per_step");
      }
    }
  }
  if (results.empty()) return 1;

  const nlohmann::json& any = results.begin()->second;
  std::printf("# dp_train_bench: %s: %s, %lld parameters, %s on %s; global batch %lld x %lld tokens = %lld tokens per "
              "step; %d steps, median step time of the last %lld; threads per rank: %s\n",
              config.c_str(), any.at("model").get<std::string>().c_str(), any.at("params").get<long long>(),
              any.at("dtype").get<std::string>().c_str(), any.at("device").get<std::string>().c_str(),
              any.at("global_batch").get<long long>(), any.at("tokens_per_sample").get<long long>(),
              any.at("tokens_per_step").get<long long>(), steps, any.at("timed_steps").get<long long>(),
              threads > 0 ? std::to_string(threads).c_str() : "cores / K");
  std::printf("#%5s", "stage");
  for (int k : ranks) std::printf(" | K=%-2d %9s %8s %5s %7s", k, "tok/s", "step ms", "accum", "loss");
  if (ranks.size() > 1) std::printf(" | K=%d/K=%d", ranks.back(), ranks.front());
  std::printf("\n");
  std::string summary_line;
  for (int stage : stages) {
    std::printf(" %5d", stage);
    for (int k : ranks) {
      auto it = results.find({stage, k});
      if (it == results.end()) {
        std::printf(" | %5s %9s %8s %5s %7s", "", "failed", "", "", "");
        continue;
      }
      const nlohmann::json& j = it->second;
      std::printf(" | %5s %9.0f %8.1f %5lld %7.4f", "", j.at("tokens_per_s").get<double>(),
                  j.at("step_time_s_median").get<double>() * 1e3, j.at("accum_steps").get<long long>(),
                  j.at("final_loss").get<double>());
    }
    auto first = results.find({stage, ranks.front()}), last = results.find({stage, ranks.back()});
    if (ranks.size() > 1 && first != results.end() && last != results.end()) {
      const double ratio = last->second.at("tokens_per_s").get<double>() / first->second.at("tokens_per_s").get<double>();
      std::printf(" | %7.2f", ratio);
    }
    std::printf("\n");
    for (int k : ranks) {
      auto it = results.find({stage, k});
      if (it == results.end()) continue;
      char cell[64];
      std::snprintf(cell, sizeof(cell), "%ss%d/K%d %.1fk", summary_line.empty() ? "" : ", ", stage, k,
                    it->second.at("tokens_per_s").get<double>() / 1e3);
      summary_line += cell;
    }
  }
  if (deterministic) {
    std::printf("\n# profiled, default vs train.deterministic: median step time, bytes sent per rank per step\n");
    std::printf("#%5s %3s | %12s %12s %8s | %12s %12s %8s\n", "stage", "K", "default ms", "determ. ms", "ratio",
                "default B", "determ. B", "ratio");
    for (const auto& [key, p] : det_pairs) {
      if (!p.ok[0] || !p.ok[1]) continue;
      std::printf(" %5d %3d | %12.1f %12.1f %8.2f | %12.0f %12.0f %8.2f\n", key.first, key.second, p.ms[0], p.ms[1],
                  p.ms[1] / p.ms[0], p.sent[0], p.sent[1], p.sent[0] > 0 ? p.sent[1] / p.sent[0] : 0.0);
    }
  }
  std::printf("\nsummary: dp-train %s tok/s by stage/K: %s\n", any.at("model").get<std::string>().c_str(),
              summary_line.c_str());
  if (keep_logs || failed) {
    std::printf("logs: %s\n", root.c_str());
  } else {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  return failed ? 1 : 0;
}
