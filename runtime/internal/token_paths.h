// The token files a data path names: one file, or the shards a glob pattern matches, as
// llm.c's `-i dev/data/fineweb10B/fineweb_train_*.bin`. Below the trainer so that
// dp-launch checks the paths (check_input_paths, --dry-run included) with the very rules
// the ranks open them by (trainer/data/token_shards.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp {

// More shards than this is a pattern that matched the wrong folder (llm.c's largest
// corpora come as about a thousand shards).
inline constexpr size_t kMaxTokenShards = 65536;

// True when `path` has glob characters (* ? [): it names shards, not one file.
bool is_shard_pattern(const std::string& path);

// The files `pattern` matches, sorted by name. kNotFound naming the pattern when none
// does; kInvalidArgument beyond kMaxTokenShards.
StatusOr<std::vector<std::string>> match_shards(const std::string& pattern);

// The files `path` names: itself when a file of that very name exists (a folder named
// "run[1]" is not a pattern), else match_shards(path) when it has glob characters.
StatusOr<std::vector<std::string>> shard_files(const std::string& path);

// kInvalidArgument naming the file when one file is among both `train`'s and `val`'s
// shard files (the same device and inode, whatever the names): held-out data that the
// model trains on measures nothing. Either path empty: no check.
Status check_disjoint_splits(const std::string& train, const std::string& val);

}  // namespace zdp
