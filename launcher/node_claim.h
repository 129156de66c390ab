// Which launchers join a job: before it starts ranks, each node's dp-launch checks the
// job's layout against node 0's and claims its node rank in node 0's store. A second
// dp-launch with the same node rank (a repeated --node-rank or SLURM_NODEID), or a node of
// another job that reached this store (the same launch.master_port and ZDP_JOB_SECRET),
// is refused here, naming why, before its ranks could join the running job and break it
// (they failed the running job's ranks; a duplicate hung in rendezvous). A claim is held
// by a lease the launcher renews every second (NodeLease): a launcher that died (SIGKILL,
// its machine down) lets its lease expire, and a new launcher for that node takes the
// claim over and rejoins the job, as torchelastic's agents do (the claim was held for
// good, and the node could never come back).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "launcher/launch_plan.h"
#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::launcher {

// "2 node(s) x 8 rank(s) = 16 ranks of dp-train, backend nccl": what every node must agree on
// (the program by its file name: each node resolves its own path).
std::string describe_layout(const LaunchPlan& plan);

// Node 0 publishes its layout, its settings (plan.settings: job_wide_settings) and its run
// id; every node (node 0 too) then checks the layout, the other nodes their settings, takes
// node 0's run id into plan.run_id (one run, one ZDP_RUN_ID on every node) and claims its
// node rank. kInvalidArgument naming both layouts, the keys whose settings differ
// (settings_difference), or the node rank already claimed; a store error (node 0 gone) as
// it came. `within` bounds the wait for node 0.
// A claim is held by a lease: the claim's epoch (returned in *epoch, for NodeLease) and a
// value its launcher renews. A node rank already claimed is taken over when its lease was
// not renewed for `lease_expiry` (the wait for that makes a refused duplicate take that
// long), unless its launcher finished its part (NodeLease::finished): the takeover raises
// the epoch, and the launcher it replaces, if it lives on, sees that and stops.
inline constexpr std::chrono::milliseconds kLeaseInterval{1000};
inline constexpr std::chrono::milliseconds kLeaseExpiry{5000};
Status join_job(Store& store, LaunchPlan& plan, std::chrono::milliseconds within, int64_t* epoch,
                std::chrono::milliseconds lease_expiry = kLeaseExpiry);

// Renews node `node`'s lease every kLeaseInterval on a thread of its own, on a store
// connection of its own (`connect`, given a predicate that turns true when the lease is
// being destroyed: a frozen store then holds neither the launcher's main connection nor
// its exit), from construction (right after join_job) to destruction. Before each renewal
// it reads the claim's epoch: once another launcher has taken the node over, `on_lost` is
// called (with why) and renewals stop.
class NodeLease {
 public:
  using Connect = std::function<StatusOr<std::unique_ptr<Store>>(const std::function<bool()>& stopping)>;
  NodeLease(Connect connect, int node, int64_t epoch, std::function<void(const std::string&)> on_lost);
  ~NodeLease();
  NodeLease(const NodeLease&) = delete;
  NodeLease& operator=(const NodeLease&) = delete;
  // This node's ranks all finished: the lease is marked done and never taken over (a
  // rerun of a node that finished would join a job that is over and fail it).
  void finished();

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// NodeLease's connections to node 0's store (plan's master address, port and secret),
// each checked to be the store of plan.run_id's run (check_same_run).
NodeLease::Connect lease_connection(const LaunchPlan& plan);

// OK when `store` holds run `run_id` (node 0's run id, read at join_job). A store that node
// 0's launcher restarted (a new run on the same address and port) holds another or none:
// kPeerFailure saying so. A launcher that reconnected to it read its empty keys as its
// own, called its claim "taken over" and could write into the new run's keys.
Status check_same_run(Store& store, const std::string& run_id);

// A new connection to node 0's store (plan's address, port, secret) that check_same_run
// passed, within `within`: a check that failed by the network (not by another run) is
// tried again on a new connection until then, so that one blip just after reconnecting
// does not end the job as a lost store.
StatusOr<std::unique_ptr<Store>> connect_same_run(const LaunchPlan& plan, std::chrono::milliseconds within,
                                                  const std::function<bool()>& stop);

// Node 0 publishes the attempt it runs, and a node that joins later (a replacement for a
// launcher that died) starts there instead of stepping through the attempts it missed.
Status publish_attempt(Store& store, int attempt);
int published_attempt(Store& store);  // 0 when none is published

// "the launcher of node(s) 1, 3 never joined (no dp-launch ran with that node rank, or it
// could not reach node 0's store); the launcher of node(s) 2 is gone (its lease was not
// renewed for 2.5 s: ...)", or "" when every node of `nnodes` has a launcher. A node whose
// launcher reached the store and was refused (another layout: join_job posts why) is
// named with that reason instead of "never joined". Samples the leases `lease_wait` apart.
std::string missing_launchers(Store& store, int nnodes,
                              std::chrono::milliseconds lease_wait = std::chrono::milliseconds(2500));

}  // namespace zdp::launcher
