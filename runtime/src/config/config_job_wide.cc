// job_wide_settings and per_node_keys (zdp/config.h): what every node of a multi-node job
// must agree on. Each node's dp-launch reads its own copy of the config; one that differs
// (another train.eval_every, zero.stage or seed) started ranks that left the others'
// collectives in step and hung until the collective timeout, or trained ranks whose
// replicas drifted apart without a word. The nodes compare these lines before any rank
// starts (launcher/node_claim.h).
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "runtime/src/config/config_keys.h"
#include "zdp/config.h"

namespace zdp {

const std::vector<std::string>& per_node_keys() {
  // Where this node is and what it is called (the address, interface and node rank), the
  // program's path (the layout compares its file name) and arguments, the environment
  // (NCCL_IB_HCA and friends are per host), and paths, which mount points may spell
  // differently on each node.
  static const std::vector<std::string> keys = {
      "launch.node_rank", "launch.master_addr", "launch.socket_ifname", "launch.rank_addr",
      "launch.program",   "launch.args",        "launch.env",           "launch.log_dir",
      "data.path",        "data.val_path",      "checkpoint.dir",       "profile.dir"};
  return keys;
}

std::string job_wide_settings(const Config& config) {
  const std::set<std::string> per_node(per_node_keys().begin(), per_node_keys().end());
  std::string out;
  // Paths may be spelled differently on each node, but not be set on one and empty on
  // another: an empty checkpoint.dir made that node's ranks skip the final save's
  // collectives, and node 0's failed blaming a rank that "died".
  const std::set<std::string> paths = {"data.path", "data.val_path", "checkpoint.dir", "profile.dir"};
  for (const config_internal::KeyInfo& k : config_internal::key_table()) {
    if (paths.count(k.name)) {
      const config_internal::Value v = k.get(config);
      out += k.name + " = " + (std::get<std::string>(v).empty() ? "empty" : "a path") + "\n";
      continue;
    }
    if (per_node.count(k.name)) continue;
    std::string value = config_internal::format_value(k, k.get(config));
    // checkpoint.resume is a word ("auto", "never") or a path: the nodes agree on which,
    // not on how a path is spelled.
    if (k.name == "checkpoint.resume" && config.checkpoint.resume == ResumeMode::kPath) value = "a checkpoint path";
    out += k.name + " = " + value + "\n";
  }
  return out;
}

}  // namespace zdp
