// The parameter hash deterministic mode prints at the end of a run, so that two runs are
// compared by one line: SHA-256 over the fp32 master values of every parameter in
// registration order (Engine::param_names()), each value as its 4 little-endian IEEE-754
// bytes, nothing else (no names, shapes or padding). It equals the SHA-256 of the
// concatenated data of model.safetensors' tensors taken in that order.
#pragma once

#include <string>

#include "zdp/engine.h"

namespace zdp::trainer {

// Collective (every rank gathers each parameter from its owners); rank 0 returns the 64
// hex digits, the other ranks "". REQUIRES: between steps.
StatusOr<std::string> param_sha256(Engine& engine);

}  // namespace zdp::trainer
