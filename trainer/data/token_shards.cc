// TokenShards: the sample -> (shard, offset) map (token_shards.h); the paths' glob
// expansion is runtime/internal/token_paths.h.
#include "trainer/data/token_shards.h"

#include <algorithm>
#include <utility>

#include "core/internal/sha256.h"

namespace zdp::trainer {

StatusOr<TokenShards> TokenShards::open(const std::string& path, int seq_len) {
  ZDP_ASSIGN_OR_RETURN(const std::vector<std::string> paths, shard_files(path));
  TokenShards s;
  s.seq_len_ = seq_len;
  s.files_.reserve(paths.size());
  for (const std::string& p : paths) {
    ZDP_ASSIGN_OR_RETURN(TokenFile file, TokenFile::open(p));  // mapped: its descriptor is closed
    ZDP_RETURN_IF_ERROR(check_holds_a_sample(p, file.size(), seq_len));
    s.tokens_ += file.size();
    s.first_sample_.push_back(s.first_sample_.back() + (file.size() - 1) / seq_len);
    s.files_.push_back(std::move(file));
  }
  return s;
}

Status TokenShards::check_unchanged() const {
  for (const TokenFile& file : files_) ZDP_RETURN_IF_ERROR(file.check_unchanged());
  return Status::Ok();
}

std::string TokenShards::fingerprint() const {
  constexpr int64_t kWindow = 1024;  // tokens
  Sha256 digest;
  for (const TokenFile& file : files_) {
    const int64_t count = file.size();
    digest.update(&count, sizeof(count));
    const int64_t window = std::min(kWindow, count);
    for (int w = 0; w < kFingerprintWindows; ++w) {
      // Window w starts at w/(n-1) of the way to the last full window: the first and the
      // last tokens are always read.
      const int64_t start = (count - window) / (kFingerprintWindows - 1) * w +
                            (w == kFingerprintWindows - 1 ? (count - window) % (kFingerprintWindows - 1) : 0);
      digest.update(file.tokens() + start, static_cast<size_t>(window) * sizeof(uint16_t));
    }
  }
  return digest.finish_hex().substr(0, 16);
}

TokenShards::Where TokenShards::locate(int64_t index) const {
  // The last shard whose first sample is <= index.
  const auto after = std::upper_bound(first_sample_.begin(), first_sample_.end(), index);
  const size_t shard = static_cast<size_t>(after - first_sample_.begin()) - 1;
  return {shard, (index - first_sample_[shard]) * seq_len_};
}

}  // namespace zdp::trainer
