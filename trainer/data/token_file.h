// Token shards in llm.c's .bin format (also what nanoGPT-style pipelines write through
// llm.c's tools): a header of 256 little-endian int32 -- magic 20240520, version 1, the
// token count -- followed by that many uint16 tokens. Files are memory-mapped read-only,
// so a 20 GB shard costs no RAM until its pages are read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/status.h"

namespace zdp::trainer {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// A read-only view of one token file. Move-only; unmaps on destruction.
class TokenFile {
 public:
  // kNotFound when `path` cannot be opened; kInvalidArgument when it is not a token file
  // (short, wrong magic or version, size disagreeing with the header). Every message
  // names the file.
  static StatusOr<TokenFile> open(const std::string& path);

  TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  const uint16_t* tokens() const { return tokens_; }

 private:
  TokenFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t count_ = 0;
};

// Writes `tokens` as a token file at `path`, through a temporary file and a rename, so a
// reader never sees half a file. kIoError names the path.
Status write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace zdp::trainer
