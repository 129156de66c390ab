// TokenFile: mmap, header checks with the file named in every error; write_token_file.
#include "trainer/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <utility>

#include "core/internal/input_file.h"
#include "core/internal/output_file.h"
#include "trainer/data/mapped_file_faults.h"

namespace zdp::trainer {
namespace {

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

}  // namespace

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    // Unmaps only: the destructor also ended path_'s lifetime, and moving into that string
    // freed its old buffer twice (a path longer than the small-string buffer).
    unmap();
    identity_ = other.identity_;
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

void TokenFile::unmap() {
  if (map_ != nullptr) {
    forget_mapping(map_);
    ::munmap(map_, map_bytes_);
  }
  map_ = nullptr;
}

TokenFile::~TokenFile() { unmap(); }

StatusOr<TokenFile> TokenFile::open(const std::string& path) {
  ZDP_ASSIGN_OR_RETURN(const InputFile file, InputFile::open(path, "token file", kTokenFileMaxBytes));
  const int64_t bytes = file.size();
  if (bytes < kTokenFileHeaderBytes) return decode_token_header(nullptr, bytes, path).status();
  void* map = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, file.fd(), 0);  // keeps the file
  if (map == MAP_FAILED) {
    const int err = errno;
    // Each shard is one mapping, and Linux allows vm.max_map_count (65530 by default) per
    // process, the libraries' own included: a corpus of tens of thousands of shards ends here.
    const std::string hint = err == ENOMEM ? " (every token file is one memory map and the process has reached "
                                             "its limit, /proc/sys/vm/max_map_count: fewer, larger shards, or a "
                                             "higher limit)"
                                           : "";
    return Status(StatusCode::kIoError, "token file '" + path + "': mmap: " + std::strerror(err) + hint);
  }
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) {
    const int err = errno;
    ::munmap(map, static_cast<size_t>(bytes));
    return Status(StatusCode::kIoError, "token file '" + path + "': fstat: " + std::strerror(err));
  }
  TokenFile f;
  f.identity_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
                 mtime_ns(st)};
  f.path_ = path;
  f.map_ = map;
  f.map_bytes_ = static_cast<size_t>(bytes);
  remember_mapping(map, f.map_bytes_, path);  // a SIGBUS in it names the file (mapped_file_faults.h)
  ZDP_ASSIGN_OR_RETURN(f.count_, decode_token_header(map, bytes, path));
  f.tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) + kTokenFileHeaderBytes);
  return f;
}

Status TokenFile::check_unchanged() const {
  if (map_ == nullptr) return Status::Ok();
  struct stat st {};
  // Gone, or another file now (renamed over it, as dp-data writes): the mapping still
  // holds the file this run opened, unchanged.
  if (::stat(path_.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_dev) != identity_.device ||
      static_cast<uint64_t>(st.st_ino) != identity_.inode) {
    return Status::Ok();
  }
  if (static_cast<int64_t>(st.st_size) == identity_.bytes && mtime_ns(st) == identity_.mtime_ns) {
    return Status::Ok();
  }
  const double later_s = static_cast<double>(mtime_ns(st) - identity_.mtime_ns) / 1e9;
  char when[64];
  std::snprintf(when, sizeof(when), "its modification time moved %+.3f s", later_s);
  return Status(StatusCode::kIoError,
                "token file '" + path_ + "' was changed in place while this run reads it (" +
                    (static_cast<int64_t>(st.st_size) != identity_.bytes
                         ? std::to_string(identity_.bytes) + " -> " + std::to_string(st.st_size) + " bytes, "
                         : std::string()) +
                    when + "): the samples read since the last check may be the new contents. Restore the file "
                    "and resume from the last checkpoint; write a new file and rename it over the old one, as "
                    "dp-data does, to change data between runs");
}

StatusOr<std::string> stage_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return Status(StatusCode::kInvalidArgument, "token file '" + path + "': " + std::to_string(tokens.size()) +
                                                    " tokens exceed the format's int32 count; write several shards");
  }
  int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  return stage_file(path,
                    {std::string_view(reinterpret_cast<const char*>(header), sizeof(header)),
                     std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t))},
                    "token file");
}

Status write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  // A device, FIFO or folder at `path` is refused (the rename would replace it: /dev/null
  // became a token file); a link to a token file writes that file.
  ZDP_ASSIGN_OR_RETURN(const std::string target, output_target(path, "token file"));
  // Through a temporary name of this process's own, synced before the rename.
  ZDP_ASSIGN_OR_RETURN(const std::string staged, stage_token_file(target, tokens));
  return commit_staged(staged, target, "token file");
}

}  // namespace zdp::trainer
