// The settings every node of a multi-node job must share (zdp::job_wide_settings): each
// node's dp-launch reads its own copy of the config, and a copy edited on one node (another
// train.eval_every, zero.stage, seed or learning rate) started ranks that left the others'
// collectives out of step, hanging until the collective timeout without a word of why, or
// replicas that drifted apart. join_job compares each node's with node 0's before any rank
// starts (launcher/node_claim.h).
#pragma once

#include <map>
#include <string>

namespace zdp::launcher {

// "" when `mine` and `theirs` (job_wide_settings of this node's config and node 0's) agree;
// else the keys that differ, "; "-separated, each "train.eval_every = 20 here (cfg.toml:4:14),
// 10 on node 0", at most 6 and then how many more. `where` names where this node's config
// set a key (LaunchPlan::settings_where); a key absent from it is a default. `theirs` came
// over the network: it is read line by line and printed through printable.
std::string settings_difference(const std::string& mine, const std::string& theirs,
                                const std::map<std::string, std::string>& where);

}  // namespace zdp::launcher
