// Token shards in llm.c's .bin format (the header: runtime/internal/token_header.h).
// Files are memory-mapped read-only, so a 20 GB shard costs no RAM until its pages are read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/internal/token_header.h"
#include "zdp/status.h"

namespace zdp::trainer {

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
