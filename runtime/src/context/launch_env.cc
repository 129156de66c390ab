// Reading the launcher's environment (torchrun names, then Slurm, then a world of 1).
#include "zdp/launch_env.h"

#include <cctype>
#include <cstdlib>

#include "core/internal/parse_decimal.h"
#include "core/internal/printable.h"
#include "runtime/internal/config_limits.h"
#include "runtime/internal/rank_address.h"
#include "zdp/tcp_store.h"

namespace zdp {
namespace {

class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& lookup) : lookup_(lookup) {}

  bool has(const char* name) const { return lookup_(name) != nullptr; }
  std::string text(const char* name, const std::string& fallback = "") const {
    const char* v = lookup_(name);
    return v ? std::string(v) : fallback;
  }
  // Reads `name` into *out when set; records an error when it is set but not an integer.
  void integer(const char* name, int* out) {
    const char* v = lookup_(name);
    if (v == nullptr) return;
    if (!parse_int(v, out)) {
      errors_ += std::string(errors_.empty() ? "" : "; ") + name + "=\"" + printable(v, 64) + "\" is not an integer";
    }
  }
  void error(const std::string& e) { errors_ += (errors_.empty() ? "" : "; ") + e; }
  const std::string& errors() const { return errors_; }

 private:
  const EnvLookup& lookup_;
  std::string errors_;
};

// Slurm's SLURM_TASKS_PER_NODE looks like "4(x2),3": the first count is this layout's
// local world for homogeneous jobs, which is what we support. -1 when it does not start
// with a count of at most 2^20 (it was summed into an int unchecked: 4294967297 read as 1).
int first_task_count(const std::string& tasks_per_node) {
  size_t digits = 0;
  while (digits < tasks_per_node.size() && std::isdigit(static_cast<unsigned char>(tasks_per_node[digits]))) ++digits;
  int64_t n = 0;
  if (!parse_decimal(std::string_view(tasks_per_node).substr(0, digits), 1, int64_t{1} << 20, &n)) return -1;
  return static_cast<int>(n);
}

// A PrefixStore that owns the store it prefixes.
class AttemptStore final : public PrefixStore {
 public:
  AttemptStore(std::string prefix, std::unique_ptr<Store> base) : PrefixStore(std::move(prefix), *base), base_(std::move(base)) {}

 private:
  std::unique_ptr<Store> base_;
};

}  // namespace

const char* slurm_nodelist_variable(const EnvLookup& lookup) {
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"}) {
    if (lookup(var) != nullptr) return var;
  }
  return "SLURM_STEP_NODELIST";
}

StatusOr<std::string> first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    entry += c;
  }
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    if (entry.empty()) return Status(StatusCode::kInvalidArgument, "empty Slurm node list");
    return entry;
  }
  // "gpu[07-09,12]": the first number of the first range, zero padding kept; every group
  // of "rack[1-2]-n[01-04]" (rack1-n01: the first group alone gave rack1-n[01-04]).
  std::string host;
  size_t at = 0;
  for (size_t group = entry.find('['); group != std::string::npos; group = entry.find('[', at)) {
    const size_t close = entry.find(']', group);
    if (close == std::string::npos || close == group + 1) {
      return Status(StatusCode::kInvalidArgument, "malformed Slurm node list \"" + nodelist + "\"");
    }
    std::string first = entry.substr(group + 1, close - group - 1);
    host += entry.substr(at, group - at) + first.substr(0, first.find_first_of(",-"));
    at = close + 1;
  }
  return host + entry.substr(at);
}

StatusOr<LaunchEnv> read_launch_env(const EnvLookup& lookup) {
  EnvReader env(lookup);
  LaunchEnv out;
  out.config_path = env.text("ZDP_CONFIG");
  out.job_secret = env.text("ZDP_JOB_SECRET");
  if (!out.job_secret.empty() && out.job_secret.size() < kMinJobSecretChars) {
    env.error("ZDP_JOB_SECRET has " + std::to_string(out.job_secret.size()) + " characters, fewer than the " +
              std::to_string(kMinJobSecretChars) + " a job secret needs (e.g. $(openssl rand -hex 16))");
  }
  if (out.job_secret.size() > kMaxJobSecretChars) {
    env.error("ZDP_JOB_SECRET has " + std::to_string(out.job_secret.size()) + " characters, more than the " +
              std::to_string(kMaxJobSecretChars) + " the store takes");
  }
  env.integer("ZDP_ATTEMPT", &out.attempt);
  if (out.attempt < 0) env.error("ZDP_ATTEMPT " + std::to_string(out.attempt) + " is negative");
  out.run_id = env.text("ZDP_RUN_ID");
  if (out.run_id.size() > 64 || out.run_id.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz"
                                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_") != std::string::npos) {
    env.error("ZDP_RUN_ID=\"" + printable(out.run_id, 64) + "\" is not up to 64 letters, digits, '-' or '_'");
  }
  const bool dp_launch = env.has("ZDP_LAUNCHER");
  const bool torchrun = env.has("TORCHELASTIC_RUN_ID");
  if (env.has("RANK") || env.has("WORLD_SIZE")) {
    out.origin = dp_launch ? "dp-launch" : torchrun ? "torchrun" : "RANK/WORLD_SIZE";
    env.integer("RANK", &out.rank);
    env.integer("WORLD_SIZE", &out.world_size);
    out.master_addr = env.text("MASTER_ADDR", out.master_addr);
    // Without LOCAL_WORLD_SIZE (a launcher other than torchrun, or by hand) the node layout
    // is not given: a loopback MASTER_ADDR is one node; otherwise, when LOCAL_RANK is not
    // given either, each rank is a node of its own (a pod each); with LOCAL_RANK it is
    // refused. Taking WORLD_SIZE for it made a job over nodes one node: rank 0's store on
    // loopback, every other node's ranks waiting for their own loopback until the timeout.
    const bool loopback = is_loopback_address(out.master_addr);
    if (!env.has("LOCAL_WORLD_SIZE") && !loopback && env.has("LOCAL_RANK") && out.world_size > 1) {
      env.error("LOCAL_WORLD_SIZE is not set, and MASTER_ADDR=" + out.master_addr +
                " is not loopback: the ranks may be on several nodes; export LOCAL_WORLD_SIZE (the ranks on each "
                "node), as torchrun does");
    }
    out.local_world_size = loopback ? out.world_size : 1;
    out.local_rank = loopback ? out.rank : 0;
    env.integer("LOCAL_RANK", &out.local_rank);
    env.integer("LOCAL_WORLD_SIZE", &out.local_world_size);
    out.node_rank = out.local_world_size > 0 ? out.rank / out.local_world_size : 0;
    env.integer("GROUP_RANK", &out.node_rank);
    // A world of one needs no store (init() keeps it in memory).
    if (!env.has("MASTER_PORT") && out.world_size > 1) env.error("MASTER_PORT is not set (RANK/WORLD_SIZE are)");
    env.integer("MASTER_PORT", &out.master_port);
  } else if (env.has("SLURM_PROCID")) {
    out.origin = "slurm";
    env.integer("SLURM_PROCID", &out.rank);
    env.integer("SLURM_NTASKS", &out.world_size);
    env.integer("SLURM_LOCALID", &out.local_rank);
    const std::string tasks_per_node = env.text("SLURM_TASKS_PER_NODE", "1");
    out.local_world_size = first_task_count(tasks_per_node);
    if (out.local_world_size < 0) {
      env.error("SLURM_TASKS_PER_NODE=\"" + tasks_per_node.substr(0, 64) + "\" does not start with a task count in [1, 2^20]");
    }
    env.integer("SLURM_NODEID", &out.node_rank);
    if (env.has("MASTER_ADDR")) {
      out.master_addr = env.text("MASTER_ADDR");
    } else {
      const char* list = slurm_nodelist_variable(lookup);
      StatusOr<std::string> host = first_slurm_host(env.text(list));
      if (host.ok()) out.master_addr = *host;
      else env.error(std::string(list) + ": " + host.status().message());
    }
    out.master_port = 29500;  // torchrun's default; MASTER_PORT overrides
    env.integer("MASTER_PORT", &out.master_port);
  } else {
    out.origin = "single process";
    if (env.errors().empty()) return out;  // else: a bad ZDP_JOB_SECRET or ZDP_ATTEMPT, said below
  }
  if (env.errors().empty()) {
    if (out.world_size < 1) env.error("world size " + std::to_string(out.world_size) + " is not positive");
    // Bounded before anything is sized by them (a world of 2^31 - 1 made init allocate a
    // store key per rank, and 3 x the world overflowed an int).
    if (out.world_size > config_internal::kMaxWorldSize) {
      env.error("world size " + std::to_string(out.world_size) + " (WORLD_SIZE / SLURM_NTASKS) is more than a job may "
                "have (" + std::to_string(config_internal::kMaxWorldSize) + ")");
    }
    if (out.local_world_size > config_internal::kMaxRanksPerNode) {
      env.error("local world size " + std::to_string(out.local_world_size) +
                " (LOCAL_WORLD_SIZE / SLURM_TASKS_PER_NODE) is more than a node may run (" +
                std::to_string(config_internal::kMaxRanksPerNode) + ")");
    }
    if (out.rank < 0 || out.rank >= out.world_size) {
      env.error("rank " + std::to_string(out.rank) + " is not in a world of " + std::to_string(out.world_size));
    }
    if (out.local_world_size < 1 || out.local_rank < 0 || out.local_rank >= out.local_world_size) {
      env.error("local rank " + std::to_string(out.local_rank) + " is not in a local world of " +
                std::to_string(out.local_world_size));
    }
    if (out.local_world_size > out.world_size) {
      env.error("the local world of " + std::to_string(out.local_world_size) +
                " (LOCAL_WORLD_SIZE / SLURM_TASKS_PER_NODE) is larger than the world of " + std::to_string(out.world_size));
    }
    if (out.node_rank < 0 || out.node_rank >= out.world_size) {
      env.error("node rank " + std::to_string(out.node_rank) + " (GROUP_RANK / SLURM_NODEID) is not in [0, " +
                std::to_string(out.world_size) + ")");
    }
    if ((out.master_port < 1 || out.master_port > 65535) && !(out.world_size == 1 && out.master_port == 0)) {
      env.error("MASTER_PORT " + std::to_string(out.master_port) + " is not in 1..65535");
    }
  }
  // RANK=0 WORLD_SIZE=1 without MASTER_PORT: a world of one, its store in memory.
  if (out.world_size == 1 && out.master_port == 0 && env.errors().empty()) return out;
  out.store_host = out.master_addr;
  out.store_port = out.master_port;
  if (!dp_launch && env.errors().empty()) {
    out.rank0_hosts_store = true;
    const bool one_node = out.local_world_size == out.world_size;
    if (one_node) out.store_host = "127.0.0.1";
    if (torchrun) out.store_port = out.master_port + 1;
    env.integer("ZDP_STORE_PORT", &out.store_port);
    if (out.store_port < 1 || out.store_port > 65535) {
      env.error("the store port " + std::to_string(out.store_port) + " is not in 1..65535 (ZDP_STORE_PORT" +
                std::string(torchrun ? ", or MASTER_PORT + 1 under torchrun" : "") + ")");
    }
    if (!one_node && out.job_secret.empty()) {
      env.error("a job over several nodes (WORLD_SIZE " + std::to_string(out.world_size) + ", LOCAL_WORLD_SIZE " +
                std::to_string(out.local_world_size) +
                ") started without dp-launch has rank 0 host its store on every interface: export the same "
                "ZDP_JOB_SECRET on every node (e.g. $(openssl rand -hex 16))");
    }
  }
  if (!env.errors().empty()) {
    return Status(StatusCode::kInvalidArgument, "launch environment (" + out.origin + "): " + env.errors());
  }
  return out;
}

StatusOr<LaunchEnv> read_launch_env() {
  return read_launch_env([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

StatusOr<std::unique_ptr<Store>> connect_job_store(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  if (env.store_port == 0) {
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(env.rank) +
                                                    ": no job store (MASTER_PORT is not set); start the job with "
                                                    "dp-launch, torchrun or srun");
  }
  const std::string host_note = env.rank0_hosts_store
                                    ? "rank 0 hosts it: the job was started without dp-launch (" + env.origin + ")"
                                    : "the dp-launch of node 0 hosts it";
  StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::connect(env.store_host, env.store_port, timeout, env.job_secret, host_note);
  if (!client.ok()) return client.status().with_context("rank " + std::to_string(env.rank));
  std::unique_ptr<Store> store(new AttemptStore(attempt_prefix(env.attempt), std::move(*client)));
  ZDP_RETURN_IF_ERROR(store->set(job_keys::rank_joined(env.rank), "1"));
  return store;
}

Status announce_ready(Store& store, int rank) { return store.set(job_keys::rank_ready(rank), "1"); }

std::string attempt_prefix(int attempt) { return "a" + std::to_string(attempt); }

int rank_exit_code(const Status& failure) {
  switch (failure.code()) {
    case StatusCode::kPeerFailure:
    case StatusCode::kAborted: return kExitPeerFailed;
    case StatusCode::kTimeout: return kExitPeerTimeout;
    default: return kExitFailed;
  }
}

namespace job_keys {
std::string rank_ready(int rank) { return "zdp/ready/" + std::to_string(rank); }
std::string rank_joined(int rank) { return "zdp/joined/" + std::to_string(rank); }
std::string node_done(int node_rank) { return "zdp/node_done/" + std::to_string(node_rank); }
}  // namespace job_keys

}  // namespace zdp
