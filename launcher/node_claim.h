// Which launchers join a job: before it starts ranks, each node's dp-launch checks the
// job's layout against node 0's and claims its node rank in node 0's store, once. A second
// dp-launch with the same node rank (a repeated --node-rank or SLURM_NODEID), or a node of
// another job that reached this store (the same launch.master_port and ZDP_JOB_SECRET),
// is refused here, naming why, before its ranks could join the running job and break it
// (they failed the running job's ranks; a duplicate hung in rendezvous).
#pragma once

#include <chrono>
#include <string>

#include "launcher/launch_plan.h"
#include "zdp/status.h"
#include "zdp/store.h"

namespace zdp::launcher {

// "2 node(s) x 8 rank(s) = 16 ranks of dp-train, backend nccl": what every node must agree on
// (the program by its file name: each node resolves its own path).
std::string describe_layout(const LaunchPlan& plan);

// Node 0 publishes its layout and its run id; every node (node 0 too) then checks the
// layout, takes node 0's run id into plan.run_id (one run, one ZDP_RUN_ID on every node)
// and claims its node rank. kInvalidArgument naming both layouts, or the node rank already
// claimed; a store error (node 0 gone) as it came. `within` bounds the wait for node 0.
Status join_job(Store& store, LaunchPlan& plan, std::chrono::milliseconds within);

// "the launcher of node(s) 1, 3 never joined (no dp-launch ran with that node rank, or it
// could not reach node 0's store)", or "" when every node of `nnodes` claimed its rank.
std::string missing_launchers(Store& store, int nnodes);

}  // namespace zdp::launcher
