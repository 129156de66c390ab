// make_plan / describe_plan: deriving the job layout and the ranks' environment.
#include "launcher/launch_plan.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/internal/host_port.h"
#include "core/internal/parse_decimal.h"
#include "core/internal/printable.h"
#include "launcher/dp_train_checks.h"
#include "launcher/master_addr_check.h"
#include "runtime/internal/config_limits.h"
#include "runtime/internal/store_bind.h"

namespace zdp::launcher {
namespace {

// 128 random bits as hex, or "" when the kernel gives none (a read of /dev/urandom that
// failed unnoticed gave the secret "000...0").
std::string random_secret() {
  unsigned char bytes[16] = {0};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return hex;
}

// A regular file: access(X_OK) alone passes a directory, which the launch then failed to
// spawn in every rank and restarted for nothing (rank_process's find_program asks the same).
bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// A bare name is looked up beside dp-launch first (its tools: dp-train, dp-check), then on
// PATH; a path with a slash is taken as given.
std::string resolve_program(const std::string& program, const std::string& launcher_dir, std::string* error) {
  const std::string name = program.empty() ? "dp-train" : program;
  if (name.find('/') != std::string::npos) {
    if (!is_executable(name)) *error = "launch.program '" + name + "' is not an executable file";
    return name;
  }
  const std::string beside = launcher_dir + "/" + name;
  if (!launcher_dir.empty() && is_executable(beside)) return beside;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty() && is_executable(dir + "/" + name)) return name;
    }
  }
  *error = program.empty() ? "the default program dp-train is not installed beside dp-launch (" + launcher_dir +
                                 "); set launch.program"
                           : "launch.program '" + name + "' is neither beside dp-launch nor on PATH";
  return name;
}

// Slurm's node layout: true when both SLURM_NNODES and SLURM_NODEID are set and valid. A
// value that is set but not a number in range is an error naming the variable (`*error`),
// not a reason to fall back silently to the config's layout (each node would then run a
// job of its own) or to blame the config for Slurm's count.
bool slurm_layout(const EnvLookup& env, int* nodes, int* node, std::string* error) {
  const char* n = env("SLURM_NNODES");
  const char* id = env("SLURM_NODEID");
  if (n != nullptr && (!parse_int(n, nodes) || *nodes < 1 || *nodes > config_internal::kMaxWorldSize)) {
    *error = "SLURM_NNODES=\"" + printable(n, 32) + "\" is not a node count in [1, " +
             std::to_string(config_internal::kMaxWorldSize) + "]";
    return false;
  }
  if (id != nullptr && (!parse_int(id, node) || *node < 0 || (n != nullptr && *node >= *nodes))) {
    *error = "SLURM_NODEID=\"" + printable(id, 32) + "\" is not a node rank in [0, SLURM_NNODES" +
             (n != nullptr ? " = " + std::string(n) : std::string()) + ")";
    return false;
  }
  return n != nullptr && id != nullptr;
}

// The GPUs the ranks see: launch.env's CUDA_VISIBLE_DEVICES, when set, not the launcher's
// (CUDA reads the list up to the first entry it cannot use; "" or "-1" hides every GPU), so
// "auto" and the one-GPU-a-rank check count those.
PlanInputs as_ranks_see(const LaunchConfig& l, PlanInputs in) {
  const auto visible = l.env.find("CUDA_VISIBLE_DEVICES");
  if (visible == l.env.end()) return in;
  int entries = 0;
  for (size_t at = 0; at <= visible->second.size();) {
    const size_t comma = std::min(visible->second.find(',', at), visible->second.size());
    const std::string entry = visible->second.substr(at, comma - at);
    if (entry.empty() || entry == "-1") break;
    ++entries;
    at = comma + 1;
  }
  in.cuda_devices = std::min(in.cuda_devices, entries);
  return in;
}

}  // namespace

int64_t planned_world_size(const Config& config, const PlanInputs& given, const EnvLookup& env) {
  const PlanInputs in = as_ranks_see(config.launch, given);
  int slurm_nodes = 0, slurm_node = 0;
  std::string ignored;  // make_plan reports it
  const bool slurm = slurm_layout(env, &slurm_nodes, &slurm_node, &ignored);
  return int64_t{slurm ? slurm_nodes : config.launch.nnodes} * resolve_nproc_per_node(config.launch, in.cuda_devices);
}

StatusOr<LaunchPlan> make_plan(const Config& config, const PlanInputs& given, const EnvLookup& env) {
  const PlanInputs in = as_ranks_see(config.launch, given);
  const LaunchConfig& l = config.launch;
  std::vector<std::string> errors;
  auto refusal = [&] {
    std::string all;
    for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
    return Status(StatusCode::kInvalidArgument, all);
  };
  LaunchPlan p;
  p.nnodes = l.nnodes;
  p.node_rank = l.node_rank;
  p.master_addr = l.master_addr;
  p.master_port = l.master_port;
  p.layout_origin = "config";

  // Under Slurm (one dp-launch per node, e.g. srun --ntasks-per-node=1), the node layout
  // and node 0's address come from Slurm unless the config or --node-rank says otherwise.
  int slurm_nodes = 0, slurm_node = 0;
  std::string slurm_error;
  const bool slurm = slurm_layout(env, &slurm_nodes, &slurm_node, &slurm_error);
  if (!slurm_error.empty()) {
    errors.push_back(slurm_error);
    return refusal();
  }
  if (slurm) {
    p.layout_origin = "Slurm (SLURM_NNODES=" + std::to_string(slurm_nodes) + ", SLURM_NODEID=" +
                      std::to_string(slurm_node) + ")";
    if (config.origins.count("launch.nnodes") && l.nnodes != slurm_nodes) {
      errors.push_back(config.where("launch.nnodes") + ": launch.nnodes (" + std::to_string(l.nnodes) +
                       ") contradicts SLURM_NNODES (" + std::to_string(slurm_nodes) + ")");
    }
    // Like nnodes, a node_rank from the config must agree with Slurm's (--node-rank, a
    // deliberate per-node flag, beats both).
    if (config.origins.count("launch.node_rank") && l.node_rank != slurm_node && !in.node_rank) {
      errors.push_back(config.where("launch.node_rank") + ": launch.node_rank (" + std::to_string(l.node_rank) +
                       ") contradicts SLURM_NODEID (" + std::to_string(slurm_node) +
                       "); leave it out under Slurm, or pass --node-rank to override both");
    }
    p.nnodes = slurm_nodes;
    p.node_rank = slurm_node;
    if (const char* id = env("SLURM_JOB_ID"); id != nullptr) p.slurm_job_id = std::string(id).substr(0, 64);
    // Slurm's nodes are separate hosts: a loopback master_addr (the shipped configs once
    // set 127.0.0.1) would have every other node wait for its own loopback until the
    // startup timeout.
    if (config.origins.count("launch.master_addr") && slurm_nodes > 1 && is_loopback_address(l.master_addr)) {
      errors.push_back(config.where("launch.master_addr") + ": launch.master_addr " + l.master_addr +
                       " is loopback, but Slurm runs this " +
                       "job on " + std::to_string(slurm_nodes) + " nodes, which cannot reach node 0 there: leave the " +
                       "key out (Slurm's first node is used) or set node 0's address");
    }
    if (!config.origins.count("launch.master_addr")) {
      const char* name = slurm_nodelist_variable(env);  // the step's nodes (launch_env.h)
      StatusOr<std::string> host = first_slurm_host(env(name) ? env(name) : "");
      if (host.ok()) p.master_addr = *host;
      else errors.push_back(std::string(name) + ": " + host.status().message());
    }
  }
  if (in.node_rank) {
    if (slurm && *in.node_rank != slurm_node) p.layout_origin += ", node rank from --node-rank";
    p.node_rank = *in.node_rank;
  }
  if (p.node_rank < 0 || p.node_rank >= p.nnodes) {
    // Named by where each number came from (the flag, Slurm or the config's key).
    const std::string rank_from = in.node_rank ? std::string("--node-rank")
                                  : slurm     ? std::string("SLURM_NODEID")
                                              : config.where("launch.node_rank") + ": launch.node_rank";
    const std::string nodes_from = slurm ? std::string("SLURM_NNODES") : "launch.nnodes";
    errors.push_back(rank_from + ": node rank " + std::to_string(p.node_rank) + " is not in [0, nnodes = " +
                     std::to_string(p.nnodes) + ") (" + nodes_from + ")");
  }

  p.nproc_per_node = resolve_nproc_per_node(l, in.cuda_devices);
  // In int64: SLURM_NNODES and "auto" are not bounded by the config's cross check. The
  // same product the config's load was checked with (planned_world_size).
  const int64_t ranks = planned_world_size(config, in, env);
  if (const std::string excess = config_internal::world_size_excess(ranks); !excess.empty()) {
    const std::string nodes = slurm ? std::string("SLURM_NNODES") : config.where("launch.nnodes") + ": launch.nnodes";
    errors.push_back(nodes + " (" + std::to_string(p.nnodes) + ") x launch.nproc_per_node (" +
                     std::to_string(p.nproc_per_node) + ")" + excess);
    return refusal();
  }
  p.world_size = static_cast<int>(ranks);
  const bool use_cuda = in.cuda_devices > 0 && l.backend != Backend::kGloo;
  p.backend = resolve_backend(l.backend, use_cuda);
  if (p.backend == Backend::kNccl && in.cuda_devices == 0) {
    const std::string refusal = config.where("launch.backend") + ": launch.backend is \"nccl\" but this machine has no CUDA device";
    if (in.dry_run) {
      p.notes.push_back(refusal + ": the launch itself would stop here; the plan is for a node with " +
                        std::to_string(p.nproc_per_node) + " GPU(s)");
    } else {
      errors.push_back(refusal);
    }
  }
  if (p.backend == Backend::kNccl && p.nproc_per_node > in.cuda_devices && in.cuda_devices > 0) {
    errors.push_back("launch.nproc_per_node (" + std::to_string(p.nproc_per_node) + ") exceeds the " +
                     std::to_string(in.cuda_devices) + " CUDA devices" +
                     (in.cuda_devices < given.cuda_devices ? " that launch.env.CUDA_VISIBLE_DEVICES leaves the ranks"
                                                           : std::string()) +
                     ": NCCL needs one GPU per rank");
  }
  p.threads_per_rank = std::max(1, in.cpu_cores / std::max(1, p.nproc_per_node));

  // The store is reachable from other machines only when the job spans nodes (store_bind.h).
  p.bind_host = store_bind_host(p.master_addr, p.nnodes > 1);
  if (std::string note = master_addr_note(p); !note.empty()) p.notes.push_back(std::move(note));
  p.run_id = random_secret().substr(0, 16);
  if (const char* s = env("ZDP_JOB_SECRET"); s != nullptr && *s != '\0') {
    p.secret = s;
    p.secret_origin = "from ZDP_JOB_SECRET";
    if (p.secret.size() < kMinJobSecretChars) {
      errors.push_back("ZDP_JOB_SECRET has " + std::to_string(p.secret.size()) + " characters, fewer than the " +
                       std::to_string(kMinJobSecretChars) +
                       " a job secret needs (e.g. export ZDP_JOB_SECRET=$(openssl rand -hex 16))");
    }
    if (p.secret.size() > kMaxJobSecretChars) {
      errors.push_back("ZDP_JOB_SECRET has " + std::to_string(p.secret.size()) + " characters, more than the " +
                       std::to_string(kMaxJobSecretChars) + " the store takes");
    }
  } else if (p.nnodes == 1) {
    p.secret = random_secret();
    p.secret_origin = "generated for this job";
    if (p.secret.empty()) {
      errors.push_back(std::string("cannot generate a job secret (getrandom: ") + std::strerror(errno) +
                       "): export ZDP_JOB_SECRET=<16 or more characters>");
    }
  } else if (in.dry_run) {
    // A dry run on a login node plans the job before anyone exported the secret: say it.
    p.secret_origin = "not set";
    p.notes.push_back("a job of " + std::to_string(p.nnodes) + " nodes needs the same ZDP_JOB_SECRET in the "
                      "environment of every node's dp-launch (e.g. export ZDP_JOB_SECRET=$(openssl rand -hex 16)); "
                      "the launch itself would stop here");
  } else {
    errors.push_back("a job of " + std::to_string(p.nnodes) + " nodes needs the same ZDP_JOB_SECRET in the "
                     "environment of every node's dp-launch (e.g. export ZDP_JOB_SECRET=$(openssl rand -hex 16))");
  }

  if (p.backend == Backend::kGloo) {
    // The rank's environment: launch.env over the launcher's own.
    const EnvLookup rank_env = [&](const char* name) -> const char* {
      auto it = l.env.find(name);
      return it != l.env.end() ? it->second.c_str() : env(name);
    };
    StatusOr<RankAddress> address = choose_rank_address(l, p.master_addr, p.master_port, rank_env, p.nnodes == 1);
    if (address.ok()) {
      p.rank_address = *address;
      if (address->explicit_choice) {
        const Status usable = check_rank_address(*address);
        if (!usable.ok()) {
          // A launch key names its place in the file; GLOO_SOCKET_IFNAME set by launch.env too.
          const bool from_env_key = address->origin == "GLOO_SOCKET_IFNAME" && l.env.count("GLOO_SOCKET_IFNAME") > 0;
          const std::string key = address->origin.rfind("launch.", 0) == 0 ? address->origin
                                  : from_env_key                            ? "launch.env"
                                                                            : "";
          errors.push_back((key.empty() ? std::string("environment") : config.where(key)) +
                           (from_env_key ? ": launch.env.GLOO_SOCKET_IFNAME" : "") + ": " + usable.message());
        }
      }
    } else {
      // Not an error here (--dry-run of another cluster's config): the ranks fail naming it.
      p.rank_address.origin = address.status().message();
    }
  }

  std::string program_error;
  p.program = resolve_program(l.program, in.launcher_dir, &program_error);
  if (!program_error.empty()) errors.push_back(config.where("launch.program") + ": " + program_error);
  // What dp-train's ranks would refuse or ignore (dp_train_checks.h).
  if (runs_dp_train(l.program)) check_dp_train_ranks(config, in, &p, &errors);
  // zero.compress = "inter-node" quantizes only what crosses nodes: on one node (Slurm's
  // too) the quantized dtypes and error feedback do nothing (once only rank 0's log said so).
  if (p.nnodes == 1 && config.zero.compress == CompressScope::kInterNode) {
    for (const char* key : {"zero.reduce_dtype", "zero.gather_dtype", "zero.error_feedback"}) {
      if (config.origins.count(key)) {
        p.inert.push_back(config.where(key) + ": " + key + " has no effect: zero.compress = \"inter-node\" "
                          "quantizes only between nodes, and this job runs on one");
      }
    }
  }
  p.args = l.args;
  p.settings = job_wide_settings(config);  // join_job compares it with node 0's
  for (const auto& origin : config.origins) p.settings_where[origin.first] = config.where(origin.first);
  // Nodes that share a log folder (a network home directory) must not overwrite each
  // other's resolved config: node 0's ranks read node 1's launch.rank_addr, and a restarted
  // attempt re-read whichever node wrote last. One file a node on a job of several.
  p.config_file = in.config_file;
  if (p.nnodes > 1 && !p.config_file.empty()) {
    p.config_file = std::filesystem::path(p.config_file)
                        .replace_filename("config.node-" + std::to_string(p.node_rank) + ".toml")
                        .string();
  }

  const Status world = validate_for_world(config, p.world_size);
  if (!world.ok()) errors.push_back(world.message());
  const Status dirs = check_output_dirs(config);
  if (!dirs.ok()) errors.push_back(dirs.message());
  if (!errors.empty()) return refusal();
  return p;
}

std::vector<RankSpec> LaunchPlan::local_ranks(const Config& config, int attempt) const {
  std::vector<RankSpec> out;
  for (int local = 0; local < nproc_per_node; ++local) {
    RankSpec spec;
    spec.rank = node_rank * nproc_per_node + local;
    spec.argv.push_back(program);
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    // Thread counts first, so that launch.env can override them.
    spec.env["OMP_NUM_THREADS"] = std::to_string(threads_per_rank);
    spec.env["OPENBLAS_NUM_THREADS"] = std::to_string(threads_per_rank);
    // The interface for every library that opens sockets (Gloo's, and NCCL's bootstrap).
    if (!config.launch.socket_ifname.empty()) {
      spec.env["GLOO_SOCKET_IFNAME"] = config.launch.socket_ifname;
      spec.env["NCCL_SOCKET_IFNAME"] = config.launch.socket_ifname;
    }
    for (const auto& [k, v] : config.launch.env) spec.env[k] = v;
    spec.env["RANK"] = std::to_string(spec.rank);
    spec.env["LOCAL_RANK"] = std::to_string(local);
    spec.env["WORLD_SIZE"] = std::to_string(world_size);
    spec.env["LOCAL_WORLD_SIZE"] = std::to_string(nproc_per_node);
    spec.env["GROUP_RANK"] = std::to_string(node_rank);
    spec.env["MASTER_ADDR"] = master_addr;
    spec.env["MASTER_PORT"] = std::to_string(master_port);
    spec.env["ZDP_CONFIG"] = config_file;
    spec.env["ZDP_JOB_SECRET"] = secret;
    spec.env["ZDP_ATTEMPT"] = std::to_string(attempt);
    if (!run_id.empty()) spec.env["ZDP_RUN_ID"] = run_id;
    spec.env["ZDP_BACKEND"] = backend == Backend::kNccl ? "nccl" : "gloo";
    spec.env["ZDP_LAUNCHER"] = "dp-launch";  // the store is ours: rank 0 must not host one (launch_env.h)
    out.push_back(std::move(spec));
  }
  return out;
}

namespace {

// A word as a POSIX shell reads it back: as it is when it holds only characters no shell
// treats specially, else in single quotes (an argument "bar baz" printed bare read as two).
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                             "0123456789_@%+=:,./-") == std::string::npos;
  if (plain) return word;
  // A control character in '...' reached the terminal as it was (a newline split the
  // "#   env:" comment line): such a word is written $'...' with \xNN escapes.
  // C1 controls in UTF-8 (C2 80 to C2 9F; U+009B is CSI) too, as printable() escapes them.
  const auto c1 = [&](size_t i) {
    return static_cast<unsigned char>(word[i]) == 0xc2 && i + 1 < word.size() &&
           static_cast<unsigned char>(word[i + 1]) >= 0x80 && static_cast<unsigned char>(word[i + 1]) <= 0x9f;
  };
  const auto c0 = [&](size_t i) {
    return static_cast<unsigned char>(word[i]) < 0x20 || static_cast<unsigned char>(word[i]) == 0x7f;
  };
  bool control = false;
  for (size_t i = 0; i < word.size(); ++i) control = control || c0(i) || c1(i);
  if (control) {
    // printable()'s \xNN and \u00NN are escapes $'...' reads back as the same bytes.
    std::string quoted = "$'";
    for (size_t i = 0; i < word.size(); ++i) {
      const char c = word[i];
      if (c == '\'' || c == '\\') {
        quoted += std::string("\\") + c;
      } else if (c1(i) || c0(i)) {
        const size_t n = c1(i) ? 2 : 1;
        quoted += printable(word.substr(i, n));
        i += n - 1;
      } else {
        quoted += c;
      }
    }
    return quoted + "'";
  }
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string describe_plan(const LaunchPlan& p, const Config& config) {
  std::ostringstream s;
  s << "# world: " << p.nnodes << " node(s) x " << p.nproc_per_node << " rank(s) = " << p.world_size
    << " ranks; this is node " << p.node_rank << " (layout from " << p.layout_origin << ")\n";
  s << "# backend: " << to_string(p.backend) << "; store: " << zdp::host_port(p.master_addr, p.master_port)
    << (p.hosts_store() ? " (hosted here, listening on " + p.bind_host + ")" : " (hosted by node 0)")
    << "; job secret " << p.secret_origin << "\n";
  // What the ranks get: launch.env's values override the plan's (rank_specs).
  const auto env_or = [&](const char* name) {
    const auto it = config.launch.env.find(name);
    return it == config.launch.env.end() ? std::to_string(p.threads_per_rank) : printable(it->second) + " (launch.env)";
  };
  s << "# threads per rank: OMP " << env_or("OMP_NUM_THREADS") << ", OpenBLAS " << env_or("OPENBLAS_NUM_THREADS") << "\n";
  for (const std::string& note : p.notes) s << "# note: " << note << "\n";
  for (const std::string& note : p.inert) s << "# note: " << note << "\n";
  if (p.backend == Backend::kGloo) {
    const RankAddress& a = p.rank_address;
    s << "# ranks advertise to their peers: "
      << (a.address.empty() && a.iface.empty() ? "unknown here: " + a.origin : a.describe()) << "\n";
  } else {
    // What the ranks get: launch.env beats launch.socket_ifname, which beats the inherited value.
    const char* nccl_if = std::getenv("NCCL_SOCKET_IFNAME");
    const auto from_env = config.launch.env.find("NCCL_SOCKET_IFNAME");
    s << "# NCCL chooses its interface"
      << (from_env != config.launch.env.end() ? ": NCCL_SOCKET_IFNAME=" + from_env->second + " (launch.env)"
          : !config.launch.socket_ifname.empty() ? ": NCCL_SOCKET_IFNAME=" + config.launch.socket_ifname
          : nccl_if != nullptr                   ? std::string(": NCCL_SOCKET_IFNAME=") + nccl_if + " (inherited)"
                                                 : std::string(" (NCCL_SOCKET_IFNAME or launch.socket_ifname set it)"))
      << "\n";
  }
  for (RankSpec& spec : p.local_ranks(config, 0)) {
    s << "# rank " << spec.rank << ":";
    for (const std::string& a : spec.argv) s << " " << shell_word(a);
    s << "\n#   env:";
    for (auto& [k, v] : spec.env) s << " " << k << "=" << (k == "ZDP_JOB_SECRET" ? "<secret>" : shell_word(v));
    s << "\n";
  }
  return s.str();
}

}  // namespace zdp::launcher
