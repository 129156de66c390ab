// The launch keys against each other, and the limits of what a rank's process can be
// given: refused at load and at --dry-run, with the key named.
#include <cstddef>
#include <string>
#include <utility>

#include "core/internal/printable.h"
#include "runtime/internal/config_limits.h"
#include "runtime/src/config/cross_checker.h"

namespace zdp::config_internal {

void launch_checks(const Config& c, CrossChecker& check) {
  const LaunchConfig& l = c.launch;
  check.require(l.node_rank < l.nnodes, {"launch.node_rank", "launch.nnodes"}, [&] {
    return "launch.node_rank (" + str(l.node_rank) + ") must be less than launch.nnodes (" + str(l.nnodes) + ")";
  });
  // Addresses are resolved as written: "[fd00::1]" does not resolve, and the store bound
  // "::" and then failed. Brackets belong to URLs, not to these keys.
  for (const auto& [key, value] : {std::pair<const char*, const std::string&>{"launch.master_addr", l.master_addr},
                                   std::pair<const char*, const std::string&>{"launch.rank_addr", l.rank_addr}}) {
    check.require(value.empty() || (value.front() != '[' && value.back() != ']'), {key}, [&, key = key, &value = value] {
      return std::string(key) + " = \"" + value + "\": write an IPv6 address without brackets (fd00::1)";
    });
  }
  // "auto" (0) is resolved later, from the CUDA device count (at most kMaxRanksPerNode).
  const int64_t world = checked_mul(l.nproc_per_node > 0 ? l.nproc_per_node : 1, l.nnodes);
  const std::string excess = config_internal::world_size_excess(world);
  check.require(excess.empty(), {"launch.nproc_per_node", "launch.nnodes"}, [&] {
    return "launch.nproc_per_node (" + str(l.nproc_per_node) + ") x launch.nnodes (" + str(l.nnodes) + ")" + excess;
  });
  // Each rank gets launch.env and launch.args through execve: one string longer than
  // MAX_ARG_STRLEN (32 pages: 128 KiB with its NUL) failed every rank with "Argument list
  // too long", naming no key, and so would all of them past ARG_MAX (2 MiB with the usual
  // 8 MiB stack; half of it is left to the inherited environment and zdp's variables).
  constexpr size_t kMaxArgString = 131072;
  constexpr size_t kMaxArgTotal = size_t{1} << 20;
  size_t total = 0;
  for (const auto& [name, value] : l.env) {
    const size_t bytes = name.size() + value.size() + 2;  // NAME=value and its NUL
    total += bytes;
    check.require(bytes <= kMaxArgString, {"launch.env"}, [&, &name = name] {
      return "launch.env." + printable(name, 64) + ": " + std::to_string(bytes) +
             " bytes, more than one environment variable of a process may hold (" + std::to_string(kMaxArgString) +
             ", MAX_ARG_STRLEN)";
    });
  }
  for (size_t i = 0; i < l.args.size(); ++i) {
    const size_t bytes = l.args[i].size() + 1;
    total += bytes;
    check.require(bytes <= kMaxArgString, {"launch.args"}, [&] {
      return "launch.args[" + std::to_string(i) + "]: " + std::to_string(bytes) +
             " bytes, more than one argument of a process may hold (" + std::to_string(kMaxArgString) +
             ", MAX_ARG_STRLEN)";
    });
  }
  check.require(total <= kMaxArgTotal, {"launch.env", "launch.args"}, [&] {
    return "launch.env and launch.args hold " + std::to_string(total) + " bytes, more than zdp passes to a rank (" +
           std::to_string(kMaxArgTotal) + ": half of the usual ARG_MAX, the rest for the inherited environment)";
  });
}

}  // namespace zdp::config_internal
