// dp-train: the reference trainer. Every rank runs it (under dp-launch, torchrun-style
// launchers, Slurm, or alone as a world of 1); the config comes from $ZDP_CONFIG (what
// dp-launch writes) or --config, with --set overrides on top. The training itself is
// trainer/loop/train_loop.cc; this file turns errors into an exit code and has rank 0
// write <launch.log_dir>/train_summary.json (trainer/loop/run_summary.h) at the end.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/internal/cli_parse.h"
#include "trainer/data/mapped_file_faults.h"
#include "trainer/loop/loss_plot.h"
#include "trainer/loop/run_summary.h"
#include "trainer/loop/train_fault.h"
#include "trainer/loop/train_loop.h"
#include "zdp/config.h"
#include "zdp/context.h"
#include "zdp/launch_env.h"

int main(int argc, char** argv) {
  CLI::App app{"dp-train: train the reference models (mlp, gpt) with zdp; normally started by dp-launch"};
  zdp::InitOptions init;
  app.add_option("--config", init.config_path, "config file (default: $ZDP_CONFIG, else the defaults)");
  app.add_option("--set", init.overrides, "section.key=value override (repeatable)");
  ZDP_CLI_PARSE(app, argc, argv);
  // A token file truncated under the run is named before the rank dies of SIGBUS.
  // The rank, where a launcher other than dp-launch (which prefixes every line) gave one.
  const char* rank = std::getenv("RANK") != nullptr ? std::getenv("RANK") : std::getenv("SLURM_PROCID");
  zdp::trainer::report_mapped_file_faults(
      rank != nullptr && std::strlen(rank) < 12 ? std::string("dp-train rank ") + rank : std::string("dp-train"));

  zdp::StatusOr<zdp::Context> ctx = zdp::init(init);
  if (!ctx.ok()) {
    std::fprintf(stderr, "dp-train: %s\n", ctx.status().to_string().c_str());
    return zdp::rank_exit_code(ctx.status());  // whose fault, for the launcher's blame
  }
  // An unwritable checkpoint, profile or log directory is refused now, not at the first
  // save or after the last step (dp-launch checks the same before it starts the ranks).
  if (const zdp::Status dirs = zdp::check_output_dirs(ctx->config()); !dirs.ok()) {
    std::fprintf(stderr, "dp-train: rank %d: %s\n", ctx->rank(), dirs.to_string().c_str());
    return 1;
  }
  // Keys that do nothing in this config: dp-launch said them before it started the ranks;
  // started otherwise (torchrun, Slurm, alone), rank 0 says them.
  if (ctx->rank() == 0 && std::getenv("ZDP_LAUNCHER") == nullptr) {
    for (const std::string& note : zdp::inert_settings(ctx->config())) std::fprintf(stderr, "dp-train: note: %s\n", note.c_str());
  }
  const std::string summary_path = zdp::trainer::run_summary_path(ctx->config());
  if (ctx->rank() == 0) {
    std::error_code ignored;  // a stale summary must not pass for this run's if it fails
    std::filesystem::remove(summary_path, ignored);
    std::filesystem::remove(zdp::trainer::loss_svg_path(ctx->config().launch.log_dir), ignored);
  }
  zdp::trainer::TrainOptions options;
  if (const char* fault_text = std::getenv("ZDP_TRAIN_FAULT")) {
    zdp::StatusOr<zdp::trainer::TrainFault> fault = zdp::trainer::parse_train_fault(fault_text);
    if (!fault.ok()) {
      std::fprintf(stderr, "dp-train: rank %d: %s\n", ctx->rank(), fault.status().to_string().c_str());
      return 1;
    }
    options.at_phase = [fault = *fault](zdp::Context& c, int64_t step, zdp::trainer::TrainPhase phase) {
      if (fault.fires(c.rank(), step, c.launch_env().attempt, phase)) zdp::trainer::run_train_fault(fault, c);
    };
  }
  zdp::StatusOr<zdp::trainer::TrainSummary> done = zdp::trainer::train(*ctx, ctx->config(), options);
  if (!done.ok()) {
    std::fprintf(stderr, "dp-train: rank %d: %s\n", ctx->rank(), done.status().to_string().c_str());
    // A rank that aborted its own communicator gave up on its own: blamed, not its peers
    // (its collectives fail with kAborted, which reads as another rank's fault).
    return ctx->comm().aborted_here() ? zdp::kExitFailed : zdp::rank_exit_code(done.status());
  }
  if (ctx->rank() == 0) {
    std::printf("dp-train: %zu steps in %.1f s%s\n", done->losses.size(), done->seconds,
                done->resumed_from.empty() ? "" : (" (resumed from " + done->resumed_from + ")").c_str());
    const zdp::Status written = zdp::trainer::write_run_summary(
        summary_path, zdp::trainer::run_summary(ctx->config(), ctx->world_size(), ctx->device().name(), *done));
    if (!written.ok()) done->output_failures.insert(done->output_failures.begin(), written);
    else std::printf("dp-train: summary in %s\n", summary_path.c_str());
    // loss.svg beside the summary: the picture of the curve the summary holds.
    const zdp::Config& config = ctx->config();
    const std::string title = std::string(zdp::to_string(config.model.kind)) + ", " + std::to_string(done->params) +
                              " parameters, " + std::to_string(ctx->world_size()) + " rank(s), ZeRO stage " +
                              std::to_string(config.zero.stage);
    const std::string svg_path = zdp::trainer::loss_svg_path(config.launch.log_dir);
    const zdp::Status drawn = zdp::trainer::write_text_file(
        svg_path, zdp::trainer::loss_svg(done->history, title, done->first_step));
    if (!drawn.ok()) done->output_failures.insert(done->output_failures.begin(), drawn);
    else std::printf("dp-train: loss curve in %s\n", svg_path.c_str());
  }
  // Every output that could not be written is named, each once (the profile's too).
  for (const zdp::Status& failed : done->output_failures) {
    std::fprintf(stderr, "dp-train: rank %d: the run finished, but %s\n", ctx->rank(), failed.to_string().c_str());
  }
  return done->output_failures.empty() ? 0 : 1;
}
