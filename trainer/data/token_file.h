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
  // kNotFound when `path` does not exist; kInvalidArgument when it is not a regular file
  // (a directory, FIFO or device: refused without blocking) or not a token file (short,
  // wrong magic or version, size disagreeing with the header). Every message names the file.
  static StatusOr<TokenFile> open(const std::string& path);

  TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  const uint16_t* tokens() const { return tokens_; }

  // kIoError naming the file when the file this maps was changed in place since open()
  // (its size or modification time differ): the mapping is MAP_PRIVATE, so the pages not
  // yet read come from the changed file, and a rewrite that keeps the length never
  // signals. A file replaced by a rename (or removed) is fine: the mapping keeps the old
  // one. One stat() of the path.
  Status check_unchanged() const;

 private:
  TokenFile() = default;
  void unmap();
  // The mapped file as open() saw it (fstat of its descriptor).
  struct Identity {
    uint64_t device = 0, inode = 0;
    int64_t bytes = 0;
    int64_t mtime_ns = 0;
  };
  Identity identity_;
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t count_ = 0;
};

// The token count that the header at `header` (kTokenFileHeaderBytes bytes; may be null
// when file_bytes is shorter) declares for a file of `file_bytes` bytes; kInvalidArgument,
// naming `path`, for a short file, a wrong magic or version, or a count that disagrees
// with the size. Pure (the fuzz target tests/fuzz/token_header_fuzz.cc calls it).
StatusOr<int64_t> decode_token_header(const void* header, int64_t file_bytes, const std::string& path);

// Writes `tokens` as a token file at `path`, through a temporary file of this process's
// own (never through a link planted at its name), synced, then renamed, so a reader never
// sees half a file and a crash leaves the old file or the whole new one. A link at `path`
// to a regular file writes that file; kInvalidArgument for a directory, device or FIFO
// there (or a link to one). kIoError names the path.
Status write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);
// write_token_file's first half, for token files that must change together (dp-data's
// train.bin and val.bin): the file written and synced under its temporary name beside
// `path` (returned; nothing followed, no link resolved), for core's commit_staged or
// discard_staged (core/internal/output_file.h).
StatusOr<std::string> stage_token_file(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace zdp::trainer
