// finalize()'s initial values: rank 0 computes every parameter's value from (seed, name,
// element index) and broadcasts them bucket by bucket (memory stays one bucket, even at
// stage 3); every rank keeps its owned range in the fp32 masters and the compute-dtype
// parameters, and a per-parameter hash across ranks proves that every rank received the
// same bytes.
#pragma once

#include "engine/src/engine_env.h"
#include "engine/src/optimizer_state.h"
#include "engine/src/param_gatherer.h"
#include "engine/src/param_registry.h"

namespace zdp {

// `staging`: initial_values_staging_bytes(layout) of device memory, allocated before
// finalize()'s failure agreement (an allocation that failed after it left the peers
// waiting in the first broadcast until the collective timeout).
int64_t initial_values_staging_bytes(const Layout& layout);
Status write_initial_values(EngineEnv& env, const EngineOptions& options, const Layout& layout,
                            const ParamRegistry& registry, OptimizerState& state, ParamGatherer& params,
                            DeviceBuffer staging);

}  // namespace zdp
