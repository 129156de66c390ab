// Node 0 of a job of several nodes hosts the store on every interface and reaches it, as
// every node does, at launch.master_addr. When that is not an address of this host (node
// ranks swapped, a typo), the store still came up here and nothing said so: node 0's own
// launcher then waited 30 s for "the store of node 0" and blamed it. A service address
// that leads here without being this host's (NAT, a virtual IP) stays possible, so this
// is a note, not a refusal.
#pragma once

#include <string>

#include "launcher/launch_plan.h"

namespace zdp::launcher {

// The note for node 0 of a job of several nodes whose master_addr this host cannot bind;
// "" otherwise (other nodes, one node: the bind itself refuses it there, at once).
std::string master_addr_note(const LaunchPlan& plan);

}  // namespace zdp::launcher
