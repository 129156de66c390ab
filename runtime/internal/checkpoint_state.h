// state.json of a checkpoint: the CheckpointInfo of zdp/checkpoint.h as JSON, written by
// the saving ranks and read (and checked field by field) by loads and tools.
#pragma once

#include <string>

#include "zdp/checkpoint.h"

namespace zdp::checkpoint {

// The largest state.json (or latest) read_small_file() reads, and encode_state() writes:
// state.json carries the trainer's loss history, and 64 MiB is ~1e6 logged steps.
inline constexpr int64_t kMaxSmallFileBytes = int64_t{64} << 20;

// The JSON text of state.json. kInvalidArgument when state.trainer_json does not parse,
// or when the text would be larger than kMaxSmallFileBytes.
StatusOr<std::string> encode_state(const CheckpointInfo& info);
// Parses state.json text; `where` (its path) starts every error, which names the field.
StatusOr<CheckpointInfo> decode_state(const std::string& text, const std::string& where);
// Checks that trainer_json ("" = {}) parses; its compact form.
StatusOr<std::string> normalize_trainer_json(const std::string& trainer_json);

// Whole-file helpers for small files (state.json, latest). kNotFound for a missing one.
StatusOr<std::string> read_small_file(const std::string& path);

}  // namespace zdp::checkpoint
