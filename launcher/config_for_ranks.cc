// config_for_ranks (launch_plan.h): the resolved config dp-launch writes for its ranks
// carries the layout the launch resolved, not the file's defaults.
#include <string>

#include "launcher/launch_plan.h"

namespace zdp::launcher {
namespace {

// Sets `key`'s value and says where it came from (describe_resolved writes `from` as the
// key's comment; a rank reading the file names it in errors).
template <typename T>
void resolve(Config& config, T LaunchConfig::*field, const T& value, const char* key, const std::string& from) {
  if (config.launch.*field == value) return;
  config.launch.*field = value;
  KeyOrigin& origin = config.origins[key];
  origin = KeyOrigin{};
  origin.source = ValueSource::kOverride;
  origin.forwarded = from;
}

}  // namespace

Config config_for_ranks(const Config& config, const LaunchPlan& plan, const PlanInputs& inputs) {
  Config out = config;
  const bool slurm = plan.layout_origin.rfind("Slurm", 0) == 0;
  resolve(out, &LaunchConfig::nnodes, plan.nnodes, "launch.nnodes", "SLURM_NNODES");
  resolve(out, &LaunchConfig::node_rank, plan.node_rank, "launch.node_rank",
          inputs.node_rank ? std::string("--node-rank") : std::string("SLURM_NODEID"));
  resolve(out, &LaunchConfig::master_addr, plan.master_addr, "launch.master_addr",
          slurm ? std::string("the first host of Slurm's node list") : std::string("the launch"));
  resolve(out, &LaunchConfig::nproc_per_node, plan.nproc_per_node, "launch.nproc_per_node",
          std::string("\"auto\": ") + (inputs.cuda_devices > 0 ? "one rank a CUDA device" : "the CPU default"));
  return out;
}

}  // namespace zdp::launcher
