// dp-launch: runs a zdp job from a TOML config, one process per GPU (or CPU rank):
// node 0 hosts the rendezvous store, every node spawns and supervises its ranks, and the
// first failure stops the whole job (or restarts it, up to launch.max_restarts).
#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/internal/cli_range.h"
#include "core/internal/host_port.h"
#include "core/internal/open_file_limit.h"
#include "core/internal/standard_fds.h"
#include "core/internal/usable_cpus.h"
#include "launcher/launch_plan.h"
#include "launcher/launch_signals.h"
#include "launcher/node_claim.h"
#include "launcher/output_pump.h"
#include "launcher/supervisor.h"
#include "launcher/terminal.h"
#include "planner/plan_calibrate.h"
#include "planner/plan_command.h"
#include "planner/scale_command.h"
#include "runtime/internal/lifeline.h"
#include "runtime/internal/reconnecting_store.h"
#include "zdp/config.h"
#include "zdp/device.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace {

using zdp::Status;
using namespace zdp::launcher;

void say(const std::string& line) { write_all(STDERR_FILENO, "dp-launch: " + line + "\n"); }
// Attempts count from 0, as ZDP_ATTEMPT, the ranks' logs ("=== attempt 1 ===") and dp-train do.
std::string restarting(int attempt, int restarts) {
  return "restarting the job as attempt " + std::to_string(attempt + 1) + " (restart " + std::to_string(attempt + 1) + " of " + std::to_string(restarts) + ")";
}

std::string launcher_dir() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

void report_failure(const GroupResult& r) {
  say(r.reason);
  if (r.failed_rank >= 0) {
    std::string tail;
    for (const std::string& line : r.failed_tail) tail += "  | " + line + "\n";
    say("last lines of rank " + std::to_string(r.failed_rank) + " (" + r.failed_log + "):\n" +
        (tail.empty() ? std::string("  | (no output)\n") : tail));
  }
}

// Node 0 stays up (its store serves the others) until every node has finished. Returns
// "" when they all did; otherwise why the job did not finish everywhere: another node's
// failure (the job-failed key) or nodes that never reported done within `limit`, so
// that node 0 does not report success for a job that failed elsewhere.
// `*restartable`: the job failed on another node, which restarts it (launch.max_restarts)
// unless the stop was final (job_keys::kJobFinal): node 0 must follow, or it takes the
// store away from the restarted attempt.
std::string wait_for_other_nodes(zdp::Store& store, int nnodes, std::chrono::milliseconds limit, bool* restartable) {
  *restartable = false;
  std::vector<std::string> keys;
  for (int n = 1; n < nnodes; ++n) keys.push_back(zdp::job_keys::node_done(n));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline && stop_signal().load() == 0) {
    if (store.wait(keys, std::chrono::milliseconds(500)).ok()) return "";
    zdp::StatusOr<bool> failed = store.check({zdp::job_keys::kJobFailed});
    if (failed.ok() && *failed) {
      zdp::StatusOr<std::string> why = store.get(zdp::job_keys::kJobFailed, std::chrono::milliseconds(1000));
      *restartable = !stop_is_final(store);
      return "another node stopped the job: " + (why.ok() ? *why : std::string("(reason unknown)"));
    }
  }
  if (stop_signal().load() != 0) return "";  // the caller reports the signal
  std::string missing;
  for (int n = 1; n < nnodes; ++n) {
    zdp::StatusOr<bool> done = store.check({zdp::job_keys::node_done(n)});
    if (!done.ok() || !*done) missing += (missing.empty() ? "" : ", ") + std::to_string(n);
  }
  return "node(s) " + missing + " did not report their ranks done within launch.collective_timeout_s after node 0's";
}

int run(const std::string& config_path, const std::vector<std::string>& sets, bool dry_run,
        std::optional<int> node_rank) {
  PlanInputs in;
  in.node_rank = node_rank;
  in.launcher_dir = launcher_dir();
  in.cuda_devices = zdp::cuda_device_count();
  in.cpu_cores = zdp::usable_cpu_cores();  // the affinity mask and CPU quota, not the host
  in.dry_run = dry_run;
  const zdp::EnvLookup env = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
  // The world the launch will have, so that the checks needing it (the global batch's
  // divisibility) are listed with every other problem of the file, not after they are fixed.
  zdp::StatusOr<zdp::Config> config = zdp::load_config(
      config_path, sets, [&in, &env](const zdp::Config& c) { return planned_world_size(c, in, env); });
  if (!config.ok()) {
    say("invalid configuration:\n" + config.status().message());
    return 2;
  }
  std::error_code cwd_error;  // the working folder deleted under us: said, not an uncaught exception
  in.config_file = std::filesystem::absolute(config->launch.log_dir + "/config.toml", cwd_error).string();
  if (cwd_error) {
    say("cannot launch " + config_path + ": launch.log_dir '" + config->launch.log_dir +
        "' against the working folder: " + cwd_error.message());
    return 2;
  }
  zdp::StatusOr<LaunchPlan> plan = make_plan(*config, in, env);
  if (!plan.ok()) {
    say("cannot launch " + config_path + ":\n" + plan.status().message());
    return 2;
  }
  if (dry_run) {
    std::printf("%s\n%s", zdp::describe_resolved(*config).c_str(), describe_plan(*plan, *config).c_str());
    return 0;
  }

  // Its own log lines (store reconnections, the console) say which launcher wrote them.
  zdp::set_process_role("dp-launch node " + std::to_string(plan->node_rank));
  for (const std::string& note : plan->inert) say("note: " + note);
  for (const std::string& note : plan->notes) say("note: " + note);  // the launch's own: master_addr
  install_signal_handlers();
  // Run by dp-launch scale: when it is gone, this launch stops as on SIGTERM.
  if (const int parent_lifeline = zdp::lifeline::from_env(); parent_lifeline >= 0) {
    zdp::lifeline::watch(parent_lifeline, [] { ::kill(::getpid(), SIGTERM); });
  }
  // The ranks' lifeline (runtime/internal/lifeline.h): its write end lives as long as
  // this process, however it ends.
  zdp::StatusOr<zdp::lifeline::Pipe> lifeline = zdp::lifeline::create();
  if (!lifeline.ok()) {
    say(lifeline.status().message());
    return 2;
  }
  zdp::raise_open_file_limit();  // for the launcher and, inherited, its ranks
  // The resolved config the ranks read, written now under a name of this launcher's own
  // and renamed over plan->config_file only once it holds the store's port and its node's
  // claim: a second launch of the same config that is refused (the port taken, the node
  // claimed) overwrote the running job's file, and that job's next restart trained with
  // the other launch's settings. Written before joining, so that a folder that refuses it
  // stops this launcher before it claims its node (a claim it would hold for good).
  std::error_code ec;
  std::filesystem::create_directories(config->launch.log_dir, ec);
  struct PendingFile {
    std::string path;
    ~PendingFile() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } pending{plan->config_file + ".pending-" + std::to_string(::getpid())};
  if (const Status written = zdp::write_config_file(config_for_ranks(*config, *plan, in), pending.path);
      !written.ok()) {
    // check_output_dirs passed, and still the folder refused (a filesystem that looks
    // writable and is not, e.g. /proc for root): named as the key that chose it.
    say(config->where("launch.log_dir") + ": launch.log_dir (\"" + config->launch.log_dir + "\"): " +
        written.message());
    return 2;
  }

  std::unique_ptr<zdp::TcpStoreServer> server;
  if (plan->hosts_store()) {
    zdp::TcpStoreServerOptions sopts;
    sopts.bind_host = plan->bind_host;
    sopts.port = plan->master_port;
    sopts.secret = plan->secret;
    // Two a rank and one a node's launcher, with room: the default 4096 refused jobs of
    // more than ~2000 ranks.
    sopts.max_connections = static_cast<int>(std::max<int64_t>(4096, 3 * int64_t{plan->world_size} + plan->nnodes));
    zdp::StatusOr<std::unique_ptr<zdp::TcpStoreServer>> started = zdp::TcpStoreServer::start(sopts);
    if (!started.ok()) {
      // The hint for the cause: a port in use, or an address this host does not have.
      const std::string& why = started.status().message();
      const std::string hint = why.find(std::strerror(EADDRINUSE)) != std::string::npos
                                   ? "launch.master_port; is another job using it?"
                               : why.find(std::strerror(EADDRNOTAVAIL)) != std::string::npos
                                   ? "launch.master_addr: not an address of this host, which is node 0"
                                   : "launch.master_addr, launch.master_port";
      say("cannot host the rendezvous store on " + zdp::host_port(plan->bind_host, plan->master_port) + " (" +
          hint + "): " + why);
      return 2;
    }
    server = std::move(*started);
  }
  const auto startup = std::chrono::milliseconds(static_cast<int64_t>(config->launch.startup_timeout_s * 1000));
  // As a rank waits for the store (zdp::init): startup_timeout_s, and with no startup
  // deadline (0) as long as a collective waits, at least 10 s (it gave up after 10 s).
  const auto collective = std::chrono::milliseconds(static_cast<int64_t>(config->launch.collective_timeout_s * 1000));
  const auto connect_within =
      std::max(startup.count() > 0 ? startup : collective, std::chrono::milliseconds(10000));
  zdp::StatusOr<std::unique_ptr<zdp::TcpStoreClient>> client =
      zdp::TcpStoreClient::connect(plan->master_addr, plan->master_port, connect_within,
                                   plan->secret,
                                   plan->hosts_store() ? "" : "the dp-launch of node 0 hosts it: launch.master_addr", interrupted);
  if (interrupted()) {
    say("node " + std::to_string(plan->node_rank) + ": stopped by signal " + std::to_string(stop_signal().load()) +
        " while connecting to the store of node 0");
    return 128 + stop_signal().load();
  }
  if (!client.ok()) {
    say("node " + std::to_string(plan->node_rank) + ": cannot reach the store of node 0: " + client.status().message());
    return 2;
  }
  int64_t lease_epoch = 0;
  if (const zdp::Status joined = zdp::launcher::join_job(**client, *plan, connect_within, &lease_epoch); !joined.ok()) {
    say(joined.message());
    return 2;
  }
  std::filesystem::rename(pending.path, plan->config_file, ec);  // joined: the config is this job's
  if (ec) {
    say("cannot rename " + pending.path + " to " + plan->config_file + ": " + ec.message());
    return 2;
  }
  pending.path.clear();
  say("node " + std::to_string(plan->node_rank) + "/" + std::to_string(plan->nnodes) + ": starting " +
      std::to_string(plan->nproc_per_node) + " of " + std::to_string(plan->world_size) + " ranks of " +
      plan->program + " (logs in " + config->launch.log_dir + ")");
  if (plan->nnodes > 1 && plan->backend == zdp::Backend::kGloo) {
    const zdp::RankAddress& a = plan->rank_address;
    say("node " + std::to_string(plan->node_rank) + ": ranks advertise " +
        (a.address.empty() && a.iface.empty() ? "(unknown here: " + a.origin + ")" : a.describe()) +
        " to their peers; launch.rank_addr or launch.socket_ifname choose another");
  }

  // Connected again when a network blip breaks the connection (reconnecting_store.h).
  zdp::ReconnectingStore job_store(
      std::move(*client),
      [&plan](std::chrono::milliseconds within) -> zdp::StatusOr<std::unique_ptr<zdp::Store>> {
        return zdp::launcher::connect_same_run(*plan, within, interrupted);  // node 0 not restarted
      },
      std::chrono::seconds(30), "dp-launch");
  // The node's claim, held while this launcher lives; taken over by another launcher (this
  // one was cut off longer than the lease), it leaves at once, its ranks with it (their
  // lifeline), posting nothing into the job it left.
  zdp::launcher::NodeLease lease(zdp::launcher::lease_connection(*plan), plan->node_rank, lease_epoch,
                                 [](const std::string& why) { say(why); ::_exit(1); });
  // A node that joins a job already under way (a replacement) starts at node 0's attempt.
  const int first_attempt = plan->hosts_store() ? 0 : zdp::launcher::published_attempt(job_store);
  // Node 0's store goes with its launcher: after a failure, it stays a second, so that
  // the other nodes' launchers (which read the job-failed key every 0.25 s) learn why.
  auto leave = [&plan](int code) {
    if (code != 0 && plan->hosts_store() && plan->nnodes > 1) std::this_thread::sleep_for(std::chrono::seconds(1));
    return code;
  };
  for (int attempt = first_attempt;; ++attempt) {
    if (plan->hosts_store()) (void)zdp::launcher::publish_attempt(job_store, attempt);
    zdp::PrefixStore store(zdp::attempt_prefix(attempt), job_store);
    // A node (not node 0, which stays) whose ranks all exited 0 has left: a restarted
    // attempt would wait for it until the startup timeout, on every restart left.
    const auto cannot_meet_again = [&] {
      if (plan->nnodes == 1) return false;
      const std::string gone = departed_nodes(store, plan->nnodes, plan->node_rank);
      if (!gone.empty()) say("not restarting: node(s) " + gone + " finished this attempt and left the job");
      return !gone.empty();
    };
    GroupOptions g;
    g.ranks = plan->local_ranks(*config, attempt);
    g.world_size = plan->world_size;
    g.node_rank = plan->node_rank;
    g.log_dir = config->launch.log_dir;
    g.attempt = attempt;
    g.console_fd = STDOUT_FILENO;
    g.lifeline_fd = lifeline->read_fd;
    g.live_status = zdp::is_live_terminal(STDOUT_FILENO);
    g.watch_progress = plan->hosts_store();  // node 0's launcher shows the whole job
    g.startup_timeout = startup;
    g.heartbeat_timeout = std::chrono::milliseconds(static_cast<int64_t>(config->launch.heartbeat_timeout_s * 1000));
    g.store = &store;
    g.signals_received = signals_received;
    if (plan->hosts_store() && plan->nnodes > 1) {
      g.startup_note = [&job_store, &plan] { return missing_launchers(job_store, plan->nnodes); };
    }
    const GroupResult result = run_group(g, stop_signal());
    if (result.ok()) {
      std::string elsewhere;
      bool restartable = false;
      if (plan->hosts_store() && plan->nnodes > 1) {
        elsewhere = wait_for_other_nodes(
            store, plan->nnodes, std::chrono::milliseconds(static_cast<int64_t>(config->launch.collective_timeout_s * 1000)),
            &restartable);
      }
      if (interrupted() && plan->hosts_store() && plan->nnodes > 1) {  // the other nodes' ranks may not be done
        const std::string why = "node " + std::to_string(plan->node_rank) + "'s launcher was stopped by signal " +
                                std::to_string(stop_signal().load()) + " while waiting for the other nodes";
        post_job_failed(store, why, /*final=*/true);  // nobody restarts into a store about to go
        say(why);
        return leave(128 + stop_signal().load());
      }
      if (!elsewhere.empty()) {  // node 0's ranks succeeded, the job did not
        say("node " + std::to_string(plan->node_rank) + ": " + result.reason + ", but " + elsewhere);
        // The failed node restarts the job: node 0, whose store it needs, restarts with it,
        // unless a node that finished has left (it would never meet the new attempt).
        if (restartable && attempt < config->launch.max_restarts && !cannot_meet_again()) {
          say(restarting(attempt, config->launch.max_restarts) + " (with the node that failed)");
          continue;
        }
        return 1;
      }
      say("node " + std::to_string(plan->node_rank) + ": " + result.reason);
      lease.finished();  // a node that finished is never taken over
      return 0;
    }
    report_failure(result);
    // A signal that came while the group failed (or during a spawn) stops the job: no restart,
    // here or on the other nodes.
    if (result.outcome == GroupOutcome::kInterrupted || interrupted()) {
      if (plan->nnodes > 1 && result.outcome != GroupOutcome::kInterrupted) {  // run_group posted that one
        post_job_failed(store, "node " + std::to_string(plan->node_rank) + "'s launcher received signal " +
                                   std::to_string(stop_signal().load()), /*final=*/true);
      }
      return leave(128 + stop_signal().load());
    }
    if (result.final_stop) {
      if (config->launch.max_restarts > 0) {
        say(std::string("not restarting (launch.max_restarts = ") + std::to_string(config->launch.max_restarts) +
            "): the job was stopped for good (" + to_string(result.outcome) + ")");
      }
      return leave(1);
    }
    if (attempt >= config->launch.max_restarts) {
      if (config->launch.max_restarts > 0) {
        say("giving up after " + std::to_string(attempt + 1) + " attempts (launch.max_restarts = " +
            std::to_string(config->launch.max_restarts) + ")");
      }
      return leave(1);
    }
    if (cannot_meet_again()) return leave(1);
    say(restarting(attempt, config->launch.max_restarts) + " (reason: " + result.reason + ")");
  }
}

}  // namespace

int main(int argc, char** argv) {
  zdp::open_missing_standard_fds();  // before any pipe or socket (core/internal/standard_fds.h)
  CLI::App app{"dp-launch: run a zdp data-parallel job from a TOML config, one process per GPU or CPU rank"};
  std::string config_path;
  std::vector<std::string> sets;
  bool dry_run = false;
  std::optional<int> node_rank;
  app.add_option("config", config_path, "the job's TOML config (see configs/)");
  app.add_option("--set", sets, "override one key: --set section.key=value (repeatable; beats the file)");
  app.add_flag("--dry-run", dry_run, "print the resolved config, the world layout and each rank's command "
                                     "line and environment; start nothing");
  app.add_option("--node-rank", node_rank, "this node's rank in a multi-node job (beats the config and Slurm)")
      ->check(zdp::integer_range(0, (1 << 20) - 1));  // below the largest world (config_limits.h)
  app.require_subcommand(0, 1);
  PlanArgs plan_args;
  CLI::App* plan = app.add_subcommand("plan", "predict memory per rank (stages 0-3), communication and step time; "
                                              "start nothing");
  add_plan_options(*plan, plan_args);
  ScaleArgs scale_args;
  CLI::App* scale = app.add_subcommand("scale", "run the job at several world sizes with the same per-rank batch; "
                                                "print throughput, speed-up, efficiency and the Amdahl fit");
  add_scale_options(*scale, scale_args);
  // Hidden: one rank of `plan --calibrate`'s link measurement, spawned by it.
  CalibrationPeer peer;
  CLI::App* calibrate_peer = app.add_subcommand("calibrate-peer", "")->group("");
  calibrate_peer->add_option("--rank", peer.rank)->required();
  calibrate_peer->add_option("--port", peer.port)->required();
  calibrate_peer->add_option("--small-bytes", peer.small_bytes)->required();
  calibrate_peer->add_option("--large-bytes", peer.large_bytes)->required();
  app.footer(zdp::key_reference());
  // The launch's own options before the subcommand were parsed, then dropped: a plan of
  // another config than the user meant, without a word.
  const auto options_before_subcommand = [&] {
    std::fprintf(stderr, "dp-launch: --set, --dry-run, --node-rank and the config go after '%s' (dp-launch %s "
                         "CONFIG --set k=v ...)\n",
                 plan->parsed() ? "plan" : "scale", plan->parsed() ? "plan" : "scale");
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `dp-launch CONFIG plan`: CLI11 finds plan's own config missing first.
    if ((plan->parsed() || scale->parsed()) && !config_path.empty()) return options_before_subcommand();
    // --help and --version exit 0; any other parse error is a usage error, exit 2 like
    // the launcher's own (CLI11's codes, 105-109, meant nothing to a caller).
    return app.exit(e) == 0 ? 0 : 2;
  }
  reset_inherited_signals();
  if ((plan->parsed() || scale->parsed()) && (!sets.empty() || dry_run || node_rank || !config_path.empty())) {
    return options_before_subcommand();
  }
  if (plan->parsed()) return run_plan(plan_args);
  if (scale->parsed()) return run_scale(scale_args);
  if (calibrate_peer->parsed()) {
    const Status done = run_calibration_peer(peer);
    if (!done.ok()) std::fprintf(stderr, "dp-launch calibrate-peer: rank %d: %s\n", peer.rank, done.message().c_str());
    return done.ok() ? 0 : 1;
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "dp-launch: a config is required: dp-launch config.toml (or dp-launch plan|scale config.toml; "
                         "--help lists everything)\n");
    return 2;
  }
  return run(config_path, sets, dry_run, node_rank);
}
