// The contract between a launcher and its ranks: torchrun's environment (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus zdp's own
// (ZDP_CONFIG, ZDP_JOB_SECRET), with Slurm's variables as a fallback and a world of 1
// when nothing is set. Also the store keys by which ranks check in with the launcher.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp {

// The shortest ZDP_JOB_SECRET accepted (read_launch_env, dp-launch): a secret guessed at
// thousands of tries a second must have more than a few characters of entropy;
// `openssl rand -hex 16` makes 32.
inline constexpr size_t kMinJobSecretChars = 16;
// The longest the store's authentication takes (its key limit): refused before anything starts.
inline constexpr size_t kMaxJobSecretChars = 4096;

struct LaunchEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  // The index of this rank's node: GROUP_RANK (dp-launch, torchrun), SLURM_NODEID, else
  // rank / local_world_size (torchrun's numbering: nodes hold consecutive ranks). What
  // zero.compress = "inter-node" tells same-node peers from others by.
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;      // 0: no store (a single process started by hand)
  std::string config_path;  // ZDP_CONFIG: the resolved config written by dp-launch
  std::string job_secret;   // ZDP_JOB_SECRET: presented to the store
  int attempt = 0;          // ZDP_ATTEMPT: how many times the launcher restarted the job
  // ZDP_RUN_ID: dp-launch's run, the same in every attempt (at most 64 letters, digits,
  // '-' or '_'); "" without one. dp-train marks its checkpoints with it.
  std::string run_id;
  std::string origin;       // "dp-launch", "torchrun", "RANK/WORLD_SIZE", "slurm" or "single process": for messages
  // Where the job's store is. Under dp-launch (which sets ZDP_LAUNCHER) its node-0
  // launcher hosts it at MASTER_ADDR:MASTER_PORT. Otherwise (torchrun, srun, by hand)
  // rank 0 hosts it in zdp::init: at MASTER_PORT, or MASTER_PORT + 1 under torchrun
  // (TORCHELASTIC_RUN_ID set), whose agent holds MASTER_PORT; $ZDP_STORE_PORT overrides
  // both. A job on one node (LOCAL_WORLD_SIZE = WORLD_SIZE) uses 127.0.0.1; a job over
  // several nodes listens on every interface and needs ZDP_JOB_SECRET.
  bool rank0_hosts_store = false;
  std::string store_host;   // where the ranks connect
  int store_port = 0;       // 0: no store
};

// Looks a variable up; nullptr when unset. Tests pass a fake environment.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the rank's place in the job. kInvalidArgument names the variable and its value
// when one is malformed or inconsistent (e.g. RANK 4 with WORLD_SIZE 4), or a
// ZDP_JOB_SECRET is set but shorter than kMinJobSecretChars.
StatusOr<LaunchEnv> read_launch_env(const EnvLookup& lookup);
StatusOr<LaunchEnv> read_launch_env();  // from the process environment

// The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07".
StatusOr<std::string> first_slurm_host(const std::string& nodelist);

// Which variable holds the node list the job's master comes from: the step's
// (SLURM_STEP_NODELIST, else SLURM_NODELIST, which srun also sets to the step's), else the
// allocation's (SLURM_JOB_NODELIST). SLURM_NODEID and SLURM_NNODES count the step's nodes,
// and a step on part of the allocation (srun -N2 -r2) does not run on the job's first
// node. "SLURM_STEP_NODELIST" when none is set.
const char* slurm_nodelist_variable(const EnvLookup& lookup);

// Marks this rank ready (job_keys::rank_ready): call once the communicator is up.
Status announce_ready(Store& store, int rank);

// Connects to the job's store (store_host:store_port) with the job secret, and marks
// the rank as joined (job_keys::rank_joined). While the store cannot be reached, a
// warning says so every few seconds, naming who hosts it. Keys are
// scoped to this attempt ("a<attempt>/..."), so a restarted job never reads the
// addresses of the ranks it replaced.
StatusOr<std::unique_ptr<Store>> connect_job_store(const LaunchEnv& env, std::chrono::milliseconds timeout);

// "a3": the key prefix of attempt 3 (what connect_job_store scopes to).
std::string attempt_prefix(int attempt);

// Exit codes by which a rank tells its launcher whose fault its failure was. When ranks
// fail together (a checkpoint's agreement, a peer's crash breaking every connection), the
// first to exit was blamed, often a healthy one; dp-launch blames a rank that failed on
// its own (any other non-zero code, or a signal) before one that exited with these, and
// consults the heartbeats about a collective's laggard only for kExitPeerTimeout.
inline constexpr int kExitFailed = 1;       // the rank's own failure
inline constexpr int kExitPeerFailed = 3;   // stopped because another rank failed or its connection broke
inline constexpr int kExitPeerTimeout = 4;  // timed out waiting for another rank (a collective, the store)
// The exit code for a rank that ends with `failure` (not OK): kExitPeerFailed for
// kPeerFailure and kAborted (stopped because of an earlier failure, another rank's as the
// checkpoint agreement reports it), kExitPeerTimeout for kTimeout, else kExitFailed.
int rank_exit_code(const Status& failure);

// Store keys shared by launchers and ranks (within an attempt's prefix).
namespace job_keys {
// Set by connect_job_store when a rank reaches the store: the job uses zdp's rendezvous,
// so the launcher holds it to startup_timeout_s.
std::string rank_joined(int rank);
// Set by a rank once it has joined the job (store and communicator up): the launcher's
// startup_timeout_s counts until every rank has set it.
std::string rank_ready(int rank);
// Set by any launcher that stops the job; its value says why. Every launcher watches it.
inline const char* const kJobFailed = "zdp/job/failed";
// Set, before kJobFailed, by a launcher whose reason stops the job for good (a signal, a
// rank program that cannot be started, a node leaving while the others wait): no node
// restarts the attempt (launch.max_restarts), which would wait for launchers that are gone.
inline const char* const kJobFinal = "zdp/job/final";
// Set by each node's launcher when its ranks all exited 0.
std::string node_done(int node_rank);
}  // namespace job_keys

}  // namespace zdp
