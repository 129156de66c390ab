// The `dp-launch scale` command: one child dp-launch per world size, then the report
// (see scale_command.h). Children are this same executable, so each run is exactly what
// `dp-launch config.toml --set ...` would do, supervision and logs included.
#include "planner/scale_command.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/internal/cli_range.h"
#include "core/internal/stop_signals.h"
#include "planner/json_lines.h"
#include "planner/run_summary_file.h"
#include "planner/scale_plot.h"
#include "planner/scale_report.h"
#include "runtime/internal/config_limits.h"
#include "runtime/internal/lifeline.h"
#include "zdp/config.h"
#include "zdp/device.h"

extern char** environ;

namespace zdp::launcher {
namespace {

namespace fs = std::filesystem;

void say(const std::string& line) { std::fprintf(stderr, "dp-launch scale: %s\n", line.c_str()); }

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::atomic<int> g_stop_signal{0};
void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// SIGINT, SIGTERM and SIGHUP stop scale and its run, as they stop dp-launch: nohup's and
// a background job's ignored SIGINT and SIGHUP stay ignored (scale replaced them, and a
// closed session stopped a nohup'd scale), a blocked mask is undone (stop_signals.h).
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  zdp::install_stop_signals(sa, {SIGINT, SIGTERM, SIGHUP});
}

// Runs `argv` with our stdout/stderr; its exit code, or 128 + signal, or -1 when it could
// not start or be waited for. posix_spawn, not fork: nothing of ours runs in the child
// before exec (docs/design.md, "Fork safety"). The child (a dp-launch) gets a lifeline
// (runtime/internal/lifeline.h): when this process is gone, even by SIGKILL, it stops its
// ranks. A SIGINT, SIGTERM or SIGHUP is passed on to it and its end waited for. Ctrl-C at
// the terminal reaches both, so the run may get it twice within milliseconds: dp-launch
// takes a second signal as "hurry" (SIGKILL the ranks) only a second or more after the first.
int run_child(const std::vector<std::string>& argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  StatusOr<lifeline::Pipe> line = lifeline::create();
  if (!line.ok()) {
    say(line.status().message());
    return -1;
  }
  // Each run is one node (launch.nnodes = 1): Slurm's node layout, inside a multi-node
  // allocation, made the child plan SLURM_NNODES nodes and refuse scale's own --set.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto is = [&](const std::string& name) { return entry.rfind(name + "=", 0) == 0; };
    if (!is(lifeline::kEnv) && !is("SLURM_NNODES") && !is("SLURM_NODEID")) env_strings.push_back(entry);
  }
  env_strings.push_back(std::string(lifeline::kEnv) + "=" + std::to_string(line->read_fd));
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Before the spawn: a signal that came between two runs stops scale here rather than
  // after a whole further run (the flag was only read when a wait was interrupted).
  install_stop_handlers();
  if (g_stop_signal.load() != 0) {
    ::close(line->read_fd);
    ::close(line->write_fd);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The same descriptor: glibc (2.29 on) then clears its close-on-exec flag in the child.
  posix_spawn_file_actions_adddup2(&actions, line->read_fd, line->read_fd);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(line->read_fd);
  if (err != 0) {
    ::close(line->write_fd);
    say("cannot run " + argv[0] + ": " + std::strerror(err));
    return -1;
  }
  // Polled, not a blocking waitpid woken by EINTR: a signal that landed just before the
  // wait began would otherwise wait for the whole run to end.
  int status = 0;
  int passed_on = 0;
  pid_t waited = -1;
  while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0 || (waited < 0 && errno == EINTR)) {
    const int sig = g_stop_signal.load();
    if (sig != 0 && sig != passed_on) {
      say("signal " + std::to_string(sig) + ": passed on to the run (pid " + std::to_string(pid) + ")");
      ::kill(pid, sig);
      passed_on = sig;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int wait_errno = errno;
  ::close(line->write_fd);
  if (waited != pid) {
    say("cannot wait for the run (pid " + std::to_string(pid) + "): " + std::strerror(wait_errno));
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void add_scale_options(CLI::App& cmd, ScaleArgs& a) {
  cmd.add_option("config", a.config_path, "the job's TOML config")->required();
  cmd.add_option("--world", a.worlds, "world sizes to run, e.g. --world 1,2,4")
      ->delimiter(',')
      ->required()
      ->check(integer_range(1, int64_t{1} << 20));
  cmd.add_option("--steps", a.steps, "optimizer steps per run (default: train.steps)")
      ->check(integer_range(1, int64_t{1} << 40));
  cmd.add_option("--set", a.sets, "override one key in every run: --set section.key=value (repeatable)");
}

int run_scale(const ScaleArgs& a) {
  StatusOr<Config> config = load_config(a.config_path, a.sets);
  if (!config.ok()) {
    say("invalid configuration:\n" + config.status().message());
    return 2;
  }
  // As dp-launch resolves it: "auto" is this machine's CUDA devices.
  const int64_t configured_world = int64_t{resolve_nproc_per_node(config->launch, cuda_device_count())} *
                                   config->launch.nnodes;
  if (const std::string excess = config_internal::world_size_excess(configured_world); !excess.empty()) {
    say("launch.nproc_per_node x launch.nnodes (" + std::to_string(config->launch.nnodes) + ")" + excess);
    return 2;
  }
  // A world size given twice ran twice into one log folder and counted twice in the fit.
  for (size_t i = 0; i < a.worlds.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (a.worlds[i] == a.worlds[j]) {
        say("--world gives " + std::to_string(a.worlds[i]) + " twice: each world size is one run");
        return 2;
      }
    }
  }
  const int configured = static_cast<int>(configured_world);
  // Its batch geometry as the launch would check it (a global batch that the world does
  // not divide gave accum_steps 0 and a child refused for a value no one typed).
  if (const Status valid = validate_for_world(*config, configured); !valid.ok()) {
    say("invalid configuration for its " + std::to_string(configured) + " ranks:\n" + valid.message());
    return 2;
  }
  const int64_t micro = config->train.micro_batch;
  const int64_t accum = resolved_accum_steps(config->train, configured);
  const int64_t steps = a.steps > 0 ? a.steps : config->train.steps;
  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    say("cannot find this executable (/proc/self/exe): " + ec.message());
    return 1;
  }

  std::vector<std::string> extra;
  if (config->optim.warmup_steps >= steps) {  // a decaying schedule needs steps after the warm-up
    extra.push_back("optim.warmup_steps=" + std::to_string(steps / 2));
    say("optim.warmup_steps (" + std::to_string(config->optim.warmup_steps) + ") is not below the " +
        std::to_string(steps) + " steps per run: warming up over " + std::to_string(steps / 2) + " of them");
  }
  const auto log_dir_of = [&](int K) {
    return (fs::path(config->launch.log_dir) / "scale" / ("world-" + std::to_string(K))).string();
  };
  // Every --set of the run at world size K: the user's, then scale's. Same per-rank work
  // at every K; one node; no checkpoints, neither saved nor resumed (a run must not resume
  // another's, nor the config's checkpoint.resume path: it timed fewer steps than the
  // report said, or none); a profile in the run's own log_dir (a configured profile.dir
  // kept only the last world size's).
  const auto sets_of = [&](int K) {
    std::vector<std::string> sets = a.sets;
    sets.insert(sets.end(), extra.begin(), extra.end());
    for (const std::string& s :
         {"launch.nproc_per_node=" + std::to_string(K), std::string("launch.nnodes=1"),
          "train.global_batch=" + std::to_string(K * micro * accum), "train.accum_steps=" + std::to_string(accum),
          "train.steps=" + std::to_string(steps), "launch.log_dir=" + quoted(log_dir_of(K)),
          std::string("profile.dir=\"\""), std::string("checkpoint.dir=\"\""), std::string("checkpoint.every_steps=0"),
          std::string("checkpoint.resume=\"never\"")}) {
      sets.push_back(s);
    }
    return sets;
  };
  // Every world size's config checked before the first run: one the launch refuses (5000
  // ranks on a node) failed only after the runs before it had taken their time.
  for (int K : a.worlds) {
    StatusOr<Config> at_k = load_config(a.config_path, sets_of(K));
    Status valid = at_k.ok() ? validate_for_world(*at_k, K) : at_k.status();
    if (!valid.ok()) {
      say("world size " + std::to_string(K) + " cannot run:\n" + valid.message());
      return 2;
    }
  }
  std::vector<ScalePoint> points;
  for (int K : a.worlds) {
    const std::string log_dir = log_dir_of(K);
    std::vector<std::string> argv = {self, a.config_path};
    for (const std::string& s : sets_of(K)) argv.insert(argv.end(), {"--set", s});
    say("world size " + std::to_string(K) + ": global batch " + std::to_string(K * micro * accum) + " = " +
        std::to_string(K) + " x " + std::to_string(micro) + " x " + std::to_string(accum) + ", " +
        std::to_string(steps) + " steps, logs in " + log_dir);
    // A summary left by an earlier run must not pass for this one's.
    fs::remove(fs::path(log_dir) / "train_summary.json", ec);
    const int code = run_child(argv);
    if (g_stop_signal.load() != 0) {
      say("stopped by signal " + std::to_string(g_stop_signal.load()) + " at world size " + std::to_string(K));
      return 128 + g_stop_signal.load();
    }
    if (code != 0) {
      say("the run at world size " + std::to_string(K) + " failed (exit " + std::to_string(code) + "); its logs: " +
          log_dir);
      return 1;
    }
    StatusOr<ScalePoint> point = read_run_summary((fs::path(log_dir) / "train_summary.json").string());
    if (!point.ok()) {
      say(point.status().message());
      return 1;
    }
    points.push_back(*point);
  }

  StatusOr<ScaleReport> report = make_scale_report(points);
  if (!report.ok()) {
    say(report.status().message());
    return 1;
  }
  const std::string heading = "dp-launch scale: " + a.config_path + ", per rank micro_batch " + std::to_string(micro) +
                              " x accum_steps " + std::to_string(accum) + " per step (weak scaling), " +
                              std::to_string(steps) + " steps per run";
  const std::string title = "dp-launch scale: " + fs::path(a.config_path).filename().string() + ", " +
                            std::to_string(steps) + " steps per run";
  return publish_report("dp-launch scale", format_scale(*report, heading), config->launch.log_dir, "scale.jsonl",
                        scale_json(*report), {"scale.svg", scale_svg(*report, title)});
}

}  // namespace zdp::launcher
