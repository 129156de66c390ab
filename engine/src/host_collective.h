// Collectives on a few host values (finalize()'s failure flag and registration check,
// the hash check of the initial values, the checkpoints' agreements and checksums),
// staged through a device buffer: a communicator takes memory of its device only (NCCL
// dereferences the pointers it is given on the GPU, and refuses host memory), so host
// vectors and stack variables never go to it directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/src/engine_env.h"

namespace zdp {

// Collective: all-reduces `values` (every rank the same length) with `op`, in place.
// Allocates and frees a device buffer and waits for both streams: for finalize() and
// checkpoints, never inside a step. Errors name `what`. REQUIRES: env.exec made.
Status all_reduce_i64(EngineEnv& env, std::vector<int64_t>& values, ReduceOp op, const std::string& what);

}  // namespace zdp
