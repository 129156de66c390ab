#include "launcher/node_claim.h"

#include <filesystem>

#include "core/internal/printable.h"

namespace zdp::launcher {
namespace {

// Outside every attempt's prefix: a claim holds for the launcher's whole life.
constexpr const char* kLayoutKey = "zdp/launch/layout";
constexpr const char* kRunIdKey = "zdp/launch/run_id";
std::string claim_key(int node) { return "zdp/launch/node/" + std::to_string(node); }

}  // namespace

std::string describe_layout(const LaunchPlan& plan) {
  return std::to_string(plan.nnodes) + " node(s) x " + std::to_string(plan.nproc_per_node) + " rank(s) = " +
         std::to_string(plan.world_size) + " ranks of " + std::filesystem::path(plan.program).filename().string() +
         ", backend " + to_string(plan.backend) +
         (plan.slurm_job_id.empty() ? std::string() : ", Slurm job " + plan.slurm_job_id);
}

Status join_job(Store& store, LaunchPlan& plan, std::chrono::milliseconds within) {
  const std::string mine = describe_layout(plan);
  const std::string node = "node " + std::to_string(plan.node_rank);
  if (plan.hosts_store()) {
    ZDP_RETURN_IF_ERROR(store.set(kRunIdKey, plan.run_id));  // before the layout the others wait for
    ZDP_RETURN_IF_ERROR(store.set(kLayoutKey, mine));
  }
  StatusOr<std::string> theirs = store.get(kLayoutKey, within);
  if (!theirs.ok()) return theirs.status().with_context(node + ": reading node 0's job layout");
  if (*theirs != mine) {
    return Status(StatusCode::kInvalidArgument,
                  node + ": this launcher plans " + mine + ", node 0's plans " + printable(*theirs) +
                      ": every node needs the same nnodes, nproc_per_node, program and backend (the same config), "
                      "and under Slurm the same job");
  }
  // Node 0's run id for every node's ranks: one run, one id in every node's checkpoints.
  StatusOr<std::string> run_id = store.get(kRunIdKey, within);
  if (!run_id.ok()) return run_id.status().with_context(node + ": reading node 0's run id");
  if (run_id->size() > 64 || run_id->find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status(StatusCode::kInvalidArgument, node + ": node 0's run id '" + printable(*run_id, 64) +
                                                    "' is not up to 64 hex digits");
  }
  plan.run_id = *run_id;
  StatusOr<int64_t> claims = store.add(claim_key(plan.node_rank), 1);
  if (!claims.ok()) return claims.status().with_context(node + ": claiming its node rank");
  if (*claims != 1) {
    return Status(StatusCode::kInvalidArgument,
                  node + " has already joined the job whose store is at " + plan.master_addr + ":" +
                      std::to_string(plan.master_port) + ": another dp-launch runs with this node rank (--node-rank, "
                      "launch.node_rank, SLURM_NODEID), or another job uses this launch.master_port with the same "
                      "ZDP_JOB_SECRET (give each job its own port)");
  }
  return Status::Ok();
}

std::string missing_launchers(Store& store, int nnodes) {
  std::string missing;
  for (int n = 0; n < nnodes; ++n) {
    StatusOr<bool> claimed = store.check({claim_key(n)});
    if (claimed.ok() && !*claimed) missing += (missing.empty() ? "" : ", ") + std::to_string(n);
  }
  if (missing.empty()) return "";
  return "the launcher of node(s) " + missing + " never joined (no dp-launch ran with that node rank, or it could "
         "not reach node 0's store)";
}

}  // namespace zdp::launcher
