// A training set of one token file or of many shards named by a glob pattern, as llm.c's
// `-i dev/data/fineweb10B/fineweb_train_*.bin`: a token file counts at most 2^31 - 1
// tokens (its int32 header), so a corpus of 10B tokens comes as shards. Sample i is a
// window of seq_len + 1 tokens within one shard (windows never cross a shard's end); the
// shards, sorted by name, number their samples one after the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/token_file.h"
#include "zdp/status.h"

namespace zdp::trainer {

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

class TokenShards {
 public:
  // Opens `path` (one file, or every file a pattern matches), each of them a token file of
  // at least seq_len + 1 tokens (one sample); otherwise the error names that file.
  static StatusOr<TokenShards> open(const std::string& path, int seq_len);

  int64_t samples() const { return first_sample_.back(); }
  int64_t tokens() const { return tokens_; }
  size_t shard_count() const { return files_.size(); }
  const TokenFile& shard(size_t i) const { return files_[i]; }
  // The shard holding sample `index` (< samples()) and the sample's first token in it.
  struct Where {
    size_t shard;
    int64_t offset;
  };
  Where locate(int64_t index) const;

  // A digest of the shards' contents that every rank can compute in milliseconds: each
  // shard's token count and kFingerprintWindows windows of 1024 tokens spread evenly over
  // it (32 KiB read a shard, whatever its length), SHA-256 over all of
  // it in shard order, as 16 hex digits. Two nodes holding different copies of a shard of
  // the same length differ here unless every sampled window agrees.
  std::string fingerprint() const;
  static constexpr int kFingerprintWindows = 16;

 private:
  std::vector<TokenFile> files_;
  std::vector<int64_t> first_sample_{0};  // shard i's samples are [first_sample_[i], first_sample_[i + 1])
  int64_t tokens_ = 0;
  int seq_len_ = 1;
};

}  // namespace zdp::trainer
