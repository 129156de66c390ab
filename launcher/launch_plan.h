// The world layout of one dp-launch: config + environment (Slurm, ZDP_JOB_SECRET) ->
// nodes, ranks, the store's address and every local rank's command line and environment.
// Pure: it starts nothing, so --dry-run prints exactly what a real launch would do.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rank_process.h"
#include "runtime/internal/rank_address.h"
#include "zdp/config.h"
#include "zdp/launch_env.h"

namespace zdp::launcher {

struct PlanInputs {
  std::optional<int> node_rank;      // --node-rank (beats the config and Slurm)
  std::string launcher_dir;          // where dp-launch lives (dp-train is looked up beside it)
  int cuda_devices = 0;
  int cpu_cores = 1;
  std::string config_file;           // where the resolved config will be written (ZDP_CONFIG)
  // --dry-run: plan a GPU job from a machine without GPUs (a login node, a laptop): what
  // only the launch itself needs (the CUDA devices) becomes a note, not an error.
  bool dry_run = false;
};

struct LaunchPlan {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  Backend backend = Backend::kGloo;
  std::string program;               // resolved path or name
  std::vector<std::string> args;
  std::string bind_host;             // where node 0's store listens
  // Gloo: what this node's ranks advertise to their peers (zdp::init makes the same choice
  // in each rank); `address` and `iface` empty when it could not be found here (then
  // rank_address.origin says why: the ranks report it).
  RankAddress rank_address;
  std::string secret;
  std::string secret_origin;         // "generated for this job" | "from ZDP_JOB_SECRET"
  // ZDP_RUN_ID: this run's id, the same in every attempt and on every node (join_job takes
  // node 0's); dp-train marks its checkpoints with it, so that a restarted attempt resumes
  // from this run's own `latest` (and never from another run's). 16 hex
  // characters; "" when getrandom failed.
  std::string run_id;
  std::string layout_origin;         // "config" | "Slurm (SLURM_NODEID ...)"
  std::string slurm_job_id;          // SLURM_JOB_ID, or empty: part of the layout nodes agree on
  int threads_per_rank = 1;          // OMP/OpenBLAS threads: cores / local ranks
  std::string config_file;
  std::vector<std::string> notes;    // dry-run: what the launch itself would refuse here; and (both) master_addr_note
  // dp-train's ranks: the settings that do nothing in this config (inert_settings), said
  // before the launch and in --dry-run.
  std::vector<std::string> inert;
  // What every node must share beyond the layout (job_wide_settings), and where this node's
  // config set each key ("file:line:col", "--set k=v"): join_job compares them with node 0's.
  std::string settings;
  std::map<std::string, std::string> settings_where;

  bool hosts_store() const { return node_rank == 0; }
  // This node's ranks for `attempt`: argv and the torchrun + zdp environment.
  std::vector<RankSpec> local_ranks(const Config& config, int attempt) const;
};

// The job's world size: nodes (SLURM_NNODES under Slurm, else launch.nnodes) x the ranks
// of each (launch.nproc_per_node, "auto" resolved from the CUDA devices). dp-launch loads
// the config with it (load_config's world_size_of), so that the checks needing it are
// listed with every other problem.
int64_t planned_world_size(const Config& config, const PlanInputs& inputs, const EnvLookup& env);

// kInvalidArgument lists every problem (e.g. node_rank outside nnodes, a multi-node job
// without ZDP_JOB_SECRET, a program that cannot be found, a launch.node_rank that
// contradicts SLURM_NODEID, a launch.socket_ifname or launch.rank_addr this host lacks).
StatusOr<LaunchPlan> make_plan(const Config& config, const PlanInputs& inputs, const EnvLookup& env);

// The config written for this node's ranks (ZDP_CONFIG, kept in the log folder): `config`
// with the layout this launch resolved (Slurm's nodes and node id, --node-rank, the first
// Slurm host as master_addr, "auto" ranks counted), each such value's comment naming where
// it came from. The ranks read their layout from the environment; the file is the run's
// record, and it said node_rank = 0 on every node of a Slurm job.
Config config_for_ranks(const Config& config, const LaunchPlan& plan, const PlanInputs& inputs);

// For --dry-run: the layout and each local rank's command line and environment (the
// secret shown masked).
std::string describe_plan(const LaunchPlan& plan, const Config& config);

}  // namespace zdp::launcher
