#include "launcher/node_claim.h"

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "core/internal/printable.h"
#include "zdp/log.h"

namespace zdp::launcher {
namespace {

// Outside every attempt's prefix: a claim holds for the launcher's whole life.
constexpr const char* kLayoutKey = "zdp/launch/layout";
constexpr const char* kRunIdKey = "zdp/launch/run_id";
std::string claim_key(int node) { return "zdp/launch/node/" + std::to_string(node); }
std::string lease_key(int node) { return "zdp/launch/lease/" + std::to_string(node); }
// One takeover of the claim whose lease stopped at `lease`: the first replacement wins.
std::string takeover_key(int node, const std::string& lease) {
  return "zdp/launch/takeover/" + std::to_string(node) + "/" + (lease.empty() ? "none" : lease);
}

// "pid@host": which launcher holds a lease (its value is this, '#', a renewal count).
std::string launcher_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::to_string(::getpid()) + "@" + host;
}

// The lease's value now; "" when none was written (or the store did not answer).
std::string lease_value(Store& store, int node) {
  StatusOr<bool> there = store.check({lease_key(node)});
  if (!there.ok() || !*there) return "";
  StatusOr<std::string> value = store.get(lease_key(node), std::chrono::milliseconds(1000));
  return value.ok() ? *value : "";
}

}  // namespace

struct NodeLease::State {
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
};

NodeLease::NodeLease(Store& store, int node) : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_, &store, node] {
    const std::string id = launcher_id();
    for (int64_t renewal = 1;; ++renewal) {
      const Status renewed = store.set(lease_key(node), id + "#" + std::to_string(renewal));
      if (!renewed.ok()) ZDP_LOG(kDebug) << "node " << node << "'s lease: " << renewed.message();
      std::unique_lock<std::mutex> lock(state->mu);
      if (state->wake.wait_for(lock, kLeaseInterval, [&] { return state->stop; })) return;
    }
  });
}

NodeLease::~NodeLease() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  thread_.join();
}

std::string describe_layout(const LaunchPlan& plan) {
  return std::to_string(plan.nnodes) + " node(s) x " + std::to_string(plan.nproc_per_node) + " rank(s) = " +
         std::to_string(plan.world_size) + " ranks of " + std::filesystem::path(plan.program).filename().string() +
         ", backend " + to_string(plan.backend) +
         (plan.slurm_job_id.empty() ? std::string() : ", Slurm job " + plan.slurm_job_id);
}

Status join_job(Store& store, LaunchPlan& plan, std::chrono::milliseconds within, std::chrono::milliseconds lease_expiry) {
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
    // Claimed before: by a launcher that is alive (renewing its lease), or by one that died.
    const std::string before = lease_value(store, plan.node_rank);
    std::this_thread::sleep_for(lease_expiry);
    const std::string after = lease_value(store, plan.node_rank);
    StatusOr<int64_t> takeovers = after == before ? store.add(takeover_key(plan.node_rank, before), 1) : int64_t{0};
    if (!takeovers.ok()) return takeovers.status().with_context(node + ": taking over its node rank");
    if (*takeovers != 1) {
      return Status(StatusCode::kInvalidArgument,
                    node + " has already joined the job whose store is at " + plan.master_addr + ":" +
                        std::to_string(plan.master_port) + ": another dp-launch runs with this node rank (--node-rank, "
                        "launch.node_rank, SLURM_NODEID), or another job uses this launch.master_port with the same "
                        "ZDP_JOB_SECRET (give each job its own port)");
    }
    ZDP_LOG(kWarn) << node << "'s earlier launcher" << (before.empty() ? "" : " (" + printable(before, 64) + ")")
                   << " is gone (its lease was not renewed for " << lease_expiry.count()
                   << " ms): this launcher takes its place in the job";
  }
  // The lease, renewed from now on by NodeLease.
  ZDP_RETURN_IF_ERROR(store.set(lease_key(plan.node_rank), launcher_id() + "#0").with_context(node + ": its lease"));
  return Status::Ok();
}

std::string missing_launchers(Store& store, int nnodes, std::chrono::milliseconds lease_wait) {
  std::string missing, gone;
  std::vector<std::pair<int, std::string>> leases;  // the claimed nodes' (node 0's own aside)
  for (int n = 0; n < nnodes; ++n) {
    StatusOr<bool> claimed = store.check({claim_key(n)});
    if (claimed.ok() && !*claimed) missing += (missing.empty() ? "" : ", ") + std::to_string(n);
    if (claimed.ok() && *claimed && n > 0) leases.emplace_back(n, lease_value(store, n));
  }
  if (!leases.empty()) std::this_thread::sleep_for(lease_wait);
  for (const auto& [n, before] : leases) {
    if (lease_value(store, n) == before) gone += (gone.empty() ? "" : ", ") + std::to_string(n);
  }
  std::string out;
  if (!missing.empty()) {
    out = "the launcher of node(s) " + missing + " never joined (no dp-launch ran with that node rank, or it could "
          "not reach node 0's store)";
  }
  if (!gone.empty()) {
    char waited[32];
    std::snprintf(waited, sizeof(waited), "%.1f s", static_cast<double>(lease_wait.count()) / 1000.0);
    out += (out.empty() ? "" : "; ") + std::string("the launcher of node(s) ") + gone + " is gone (its lease was not " +
           "renewed for " + waited + ": killed, or its machine is down; a new dp-launch with that node rank takes its " +
           "place)";
  }
  return out;
}

}  // namespace zdp::launcher
