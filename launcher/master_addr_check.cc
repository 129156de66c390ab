// master_addr_note (master_addr_check.h).
#include "launcher/master_addr_check.h"

#include "runtime/internal/rank_address.h"

namespace zdp::launcher {

std::string master_addr_note(const LaunchPlan& plan) {
  if (!plan.hosts_store() || plan.nnodes < 2 || plan.master_addr.empty()) return "";
  RankAddress address;
  address.address = plan.master_addr;
  address.origin = "launch.master_addr";
  const Status here = check_rank_address(address);
  if (here.ok()) return "";
  return here.message() + ", yet this launcher is node 0 and hosts the job's store: is this node 0 (--node-rank, "
                          "launch.node_rank)? Every node, this one too, reaches the store at master_addr; where "
                          "that does not lead here, they wait 30 s for it and stop";
}

}  // namespace zdp::launcher
