#include "launcher/node_claim.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "core/internal/host_port.h"
#include "core/internal/parse_decimal.h"
#include "core/internal/printable.h"
#include "launcher/settings_check.h"
#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp::launcher {
namespace {

// Outside every attempt's prefix: a claim holds for the launcher's whole life.
constexpr const char* kLayoutKey = "zdp/launch/layout";
constexpr const char* kRunIdKey = "zdp/launch/run_id";
constexpr const char* kSettingsKey = "zdp/launch/settings";  // node 0's job_wide_settings
std::string claim_key(int node) { return "zdp/launch/node/" + std::to_string(node); }
std::string lease_key(int node) { return "zdp/launch/lease/" + std::to_string(node); }
std::string epoch_key(int node) { return "zdp/launch/epoch/" + std::to_string(node); }
// Why node `node`'s launcher was refused (another layout): node 0 names it, not "never joined".
std::string refused_key(int node) { return "zdp/launch/refused/" + std::to_string(node); }
// One takeover of the claim at `epoch`: the first replacement wins.
std::string takeover_key(int node, int64_t epoch) {
  return "zdp/launch/takeover/" + std::to_string(node) + "/" + std::to_string(epoch);
}
constexpr const char* kAttemptKey = "zdp/launch/attempt";
constexpr const char* kDone = "done";  // a lease whose launcher finished its part

// "pid@host": which launcher holds a lease (its value is this, '#', a renewal count).
std::string launcher_id() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::to_string(::getpid()) + "@" + host;
}

// The lease's value now; "" when none was written. A store error is an error: two failed
// reads must not compare equal and call a live launcher gone.
StatusOr<std::string> lease_value(Store& store, int node) {
  ZDP_ASSIGN_OR_RETURN(const bool there, store.check({lease_key(node)}));
  if (!there) return std::string();
  return store.get(lease_key(node), std::chrono::milliseconds(1000));
}

}  // namespace

std::string describe_layout(const LaunchPlan& plan) {
  return std::to_string(plan.nnodes) + " node(s) x " + std::to_string(plan.nproc_per_node) + " rank(s) = " +
         std::to_string(plan.world_size) + " ranks of " + std::filesystem::path(plan.program).filename().string() +
         ", backend " + to_string(plan.backend) +
         (plan.slurm_job_id.empty() ? std::string() : ", Slurm job " + plan.slurm_job_id);
}

struct NodeLease::State {
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  bool done = false;  // finished(): the last renewal writes kDone
};

NodeLease::NodeLease(Connect connect, int node, int64_t epoch, std::function<void(const std::string&)> on_lost)
    : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_, connect = std::move(connect), node, epoch, on_lost = std::move(on_lost)] {
    const std::string id = launcher_id();
    const std::function<bool()> stopping = [state] {
      std::lock_guard<std::mutex> lock(state->mu);
      return state->stop;
    };
    std::unique_ptr<Store> store;
    for (int64_t renewal = 1;; ++renewal) {
      bool done = false;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        done = state->done;
      }
      if (!store) {
        StatusOr<std::unique_ptr<Store>> fresh = connect(stopping);
        if (fresh.ok()) store = std::move(*fresh);
      }
      if (store) {
        // add(0) reads the epoch atomically: raised by a takeover, this launcher lost the node.
        StatusOr<int64_t> now = store->add(epoch_key(node), 0);
        if (now.ok() && *now != epoch) {
          on_lost("node " + std::to_string(node) + "'s claim was taken over by another dp-launch (its lease was not "
                  "renewed for " + std::to_string(kLeaseExpiry.count() / 1000) + " s): this launcher stops");
          return;
        }
        const Status renewed =
            now.ok() ? store->set(lease_key(node), done ? std::string(kDone) : id + "#" + std::to_string(renewal))
                     : now.status();
        if (!renewed.ok()) store.reset();  // connected again at the next renewal
        if (renewed.ok() && done) return;
      }
      // finished() since this turn read it: the next turn writes kDone, even when stopping.
      std::unique_lock<std::mutex> lock(state->mu);
      const auto done_to_write = [&] { return state->done && !done; };
      state->wake.wait_for(lock, kLeaseInterval, [&] { return state->stop || done_to_write(); });
      if (state->stop && !done_to_write()) return;
    }
  });
}

void NodeLease::finished() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->done = true;
  }
  state_->wake.notify_all();
}

NodeLease::~NodeLease() {
  // Told to stop: a kDone that finished() asked for is still written first, and a store
  // call in flight gives up within a second (the connection's stop predicate).
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->wake.notify_all();
  thread_.join();
}

NodeLease::Connect lease_connection(const LaunchPlan& plan) {
  return [plan](const std::function<bool()>& stopping) -> StatusOr<std::unique_ptr<Store>> {
    return connect_same_run(plan, std::chrono::seconds(2), stopping);
  };
}

StatusOr<std::unique_ptr<Store>> connect_same_run(const LaunchPlan& plan, std::chrono::milliseconds within,
                                                  const std::function<bool()>& stop) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> client,
                         TcpStoreClient::connect(plan.master_addr, plan.master_port,
                                                 std::max(left, std::chrono::milliseconds(1)), plan.secret, "", stop));
    const Status same = check_same_run(*client, plan.run_id);
    if (same.ok()) return std::unique_ptr<Store>(std::move(client));
    if (same.code() == StatusCode::kPeerFailure || std::chrono::steady_clock::now() >= until) return same;
  }
}

Status check_same_run(Store& store, const std::string& run_id) {
  ZDP_ASSIGN_OR_RETURN(const bool there, store.check({kRunIdKey}));
  StatusOr<std::string> now = there ? store.get(kRunIdKey, std::chrono::milliseconds(1000)) : StatusOr<std::string>("");
  if (!now.ok()) return now.status();
  if (*now == run_id) return Status::Ok();
  return Status(StatusCode::kPeerFailure, "node 0's store now holds " +
                                             (now->empty() ? std::string("no run yet")
                                                           : "another run (id " + printable(*now, 64) + ")") +
                                             ", not this job's (" + run_id +
                                             "): node 0's launcher was restarted, and this node's part of the job is over");
}

Status publish_attempt(Store& store, int attempt) { return store.set(kAttemptKey, std::to_string(attempt)); }

int published_attempt(Store& store) {
  StatusOr<bool> there = store.check({kAttemptKey});
  if (!there.ok() || !*there) return 0;
  StatusOr<std::string> text = store.get(kAttemptKey, std::chrono::milliseconds(1000));
  int attempt = 0;
  return text.ok() && parse_int(text->c_str(), &attempt) && attempt >= 0 ? attempt : 0;
}

Status join_job(Store& store, LaunchPlan& plan, std::chrono::milliseconds within, int64_t* epoch,
                std::chrono::milliseconds lease_expiry) {
  const std::string mine = describe_layout(plan);
  const std::string node = "node " + std::to_string(plan.node_rank);
  const auto refused = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument,
                  node + " has already joined the job whose store is at " +
                      zdp::host_port(plan.master_addr, plan.master_port) + why);
  };
  const std::string elsewhere =
      ": another dp-launch runs with this node rank (--node-rank, launch.node_rank, SLURM_NODEID), or another job "
      "uses this launch.master_port with the same ZDP_JOB_SECRET (give each job its own port)";
  // Node 0 claims before it publishes: a second node 0 on another host (its store is its
  // own, but master_addr leads its client to the running job's) overwrote that job's run
  // id and layout before its claim was refused, and a node that joined later took them.
  StatusOr<int64_t> claims = plan.hosts_store() ? store.add(claim_key(plan.node_rank), 1) : StatusOr<int64_t>(0);
  if (!claims.ok()) return claims.status().with_context(node + ": claiming its node rank");
  if (plan.hosts_store()) {
    if (*claims != 1) return refused(elsewhere);  // a store node 0 hosts is new: claimed here first
    ZDP_RETURN_IF_ERROR(store.set(kRunIdKey, plan.run_id));  // before the layout the others wait for
    ZDP_RETURN_IF_ERROR(store.set(kSettingsKey, plan.settings));  // before the layout, too
    ZDP_RETURN_IF_ERROR(store.set(kLayoutKey, mine));
  }
  StatusOr<std::string> theirs = store.get(kLayoutKey, within);
  if (!theirs.ok()) return theirs.status().with_context(node + ": reading node 0's job layout");
  if (*theirs != mine) {
    const Status mismatch(StatusCode::kInvalidArgument,
                          node + ": this launcher plans " + mine + ", node 0's plans " + printable(*theirs) +
                              ": every node needs the same nnodes, nproc_per_node, program and backend (the same "
                              "config), and under Slurm the same job");
    (void)store.set(refused_key(plan.node_rank), mismatch.message());  // best effort: for node 0's report
    return mismatch;
  }
  if (!plan.hosts_store()) {
    StatusOr<std::string> settings = store.get(kSettingsKey, within);
    if (!settings.ok()) return settings.status().with_context(node + ": reading node 0's settings");
    const std::string difference = settings_difference(plan.settings, *settings, plan.settings_where);
    if (!difference.empty()) {
      const Status mismatch(StatusCode::kInvalidArgument,
                            node + ": this node's config differs from node 0's in settings every node must share: " +
                                difference + ". Give every node the same config (only launch.node_rank, its "
                                "addresses, launch.program, args, env and the paths may differ)");
      (void)store.set(refused_key(plan.node_rank), mismatch.message());
      return mismatch;
    }
  }
  // Node 0's run id for every node's ranks: one run, one id in every node's checkpoints.
  StatusOr<std::string> run_id = store.get(kRunIdKey, within);
  if (!run_id.ok()) return run_id.status().with_context(node + ": reading node 0's run id");
  if (run_id->size() > 64 || run_id->find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status(StatusCode::kInvalidArgument, node + ": node 0's run id '" + printable(*run_id, 64) +
                                                    "' is not up to 64 hex digits");
  }
  plan.run_id = *run_id;
  if (!plan.hosts_store()) claims = store.add(claim_key(plan.node_rank), 1);
  if (!claims.ok()) return claims.status().with_context(node + ": claiming its node rank");
  if (*claims != 1) {
    // Claimed before: by a launcher that is alive (renewing its lease), that finished, or
    // that died. A takeover is one per epoch, so a winner that dies before its first
    // renewal leaves the next replacement an epoch of its own to win.
    ZDP_ASSIGN_OR_RETURN(const int64_t seen_epoch, store.add(epoch_key(plan.node_rank), 0));
    ZDP_ASSIGN_OR_RETURN(const std::string before, lease_value(store, plan.node_rank));
    if (before == kDone) return refused(", and its launcher finished its part of it (the job is over for that node)");
    std::this_thread::sleep_for(lease_expiry);
    ZDP_ASSIGN_OR_RETURN(const std::string after, lease_value(store, plan.node_rank));
    if (after != before) return refused(elsewhere);
    ZDP_ASSIGN_OR_RETURN(const int64_t takeovers, store.add(takeover_key(plan.node_rank, seen_epoch), 1));
    if (takeovers != 1) return refused(elsewhere);
    ZDP_ASSIGN_OR_RETURN(*epoch, store.add(epoch_key(plan.node_rank), 1));
    ZDP_LOG(kWarn) << node << "'s earlier launcher" << (before.empty() ? "" : " (" + printable(before, 64) + ")")
                   << " is gone (its lease was not renewed for " << lease_expiry.count()
                   << " ms): this launcher takes its place in the job";
  } else {
    ZDP_ASSIGN_OR_RETURN(*epoch, store.add(epoch_key(plan.node_rank), 1));
  }
  // The lease, renewed from now on by NodeLease.
  ZDP_RETURN_IF_ERROR(store.set(lease_key(plan.node_rank), launcher_id() + "#0").with_context(node + ": its lease"));
  return Status::Ok();
}

std::string missing_launchers(Store& store, int nnodes, std::chrono::milliseconds lease_wait) {
  std::string missing, gone, refused;
  std::vector<std::pair<int, std::string>> leases;  // the claimed nodes' (node 0's own aside)
  for (int n = 0; n < nnodes; ++n) {
    StatusOr<bool> claimed = store.check({claim_key(n)});
    if (claimed.ok() && !*claimed) {
      StatusOr<bool> was_refused = store.check({refused_key(n)});
      StatusOr<std::string> why = std::string();
      if (was_refused.ok() && *was_refused) why = store.get(refused_key(n), std::chrono::milliseconds(1000));
      if (why.ok() && !why->empty()) {
        refused += (refused.empty() ? "" : "; ") + std::string("the launcher of node ") + std::to_string(n) +
                   " reached the store and was refused: " + printable(*why, 1200);
        continue;
      }
      missing += (missing.empty() ? "" : ", ") + std::to_string(n);
    }
    if (!claimed.ok() || !*claimed || n == 0) continue;
    StatusOr<std::string> lease = lease_value(store, n);
    if (lease.ok() && *lease != kDone) leases.emplace_back(n, *lease);
  }
  if (!leases.empty()) std::this_thread::sleep_for(lease_wait);
  for (const auto& [n, before] : leases) {
    StatusOr<std::string> after = lease_value(store, n);
    if (after.ok() && *after == before) gone += (gone.empty() ? "" : ", ") + std::to_string(n);
  }
  std::string out = refused;
  if (!missing.empty()) {
    out += out.empty() ? "" : "; ";
    out += "the launcher of node(s) " + missing + " never joined (no dp-launch ran with that node rank, or it could "
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
