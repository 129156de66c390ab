// A training set of one token file or of many shards named by a glob pattern, as llm.c's
// `-i dev/data/fineweb10B/fineweb_train_*.bin`: a token file counts at most 2^31 - 1
// tokens (its int32 header), so a corpus of 10B tokens comes as shards. Sample i is a
// window of seq_len + 1 tokens within one shard (windows never cross a shard's end); the
// shards, sorted by name, number their samples one after the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/internal/token_paths.h"
#include "trainer/data/token_file.h"
#include "zdp/status.h"

namespace zdp::trainer {

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
  // TokenFile::check_unchanged() of every shard: the first changed one.
  Status check_unchanged() const;
  static constexpr int kFingerprintWindows = 16;

 private:
  std::vector<TokenFile> files_;
  std::vector<int64_t> first_sample_{0};  // shard i's samples are [first_sample_[i], first_sample_[i + 1])
  int64_t tokens_ = 0;
  int seq_len_ = 1;
};

}  // namespace zdp::trainer
