// decode_token_header, read_token_count and check_holds_a_sample (runtime/internal/token_header.h).
#include "runtime/internal/token_header.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/internal/input_file.h"

namespace zdp {
namespace {

Status malformed(const std::string& path, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, "token file '" + path + "': " + why +
                                                  " (expected llm.c's format: 256 int32 header with magic " +
                                                  std::to_string(kTokenFileMagic) + ", version 1, token count; "
                                                  "then uint16 tokens; dp-data writes it)");
}

}  // namespace

StatusOr<int64_t> decode_token_header(const void* header, int64_t file_bytes, const std::string& path) {
  if (file_bytes < kTokenFileHeaderBytes) {
    return malformed(path, std::to_string(file_bytes) + " bytes, shorter than the " +
                               std::to_string(kTokenFileHeaderBytes) + "-byte header");
  }
  int32_t fields[3];
  std::memcpy(fields, header, sizeof(fields));
  if (fields[0] != kTokenFileMagic) {
    return malformed(path, "magic number " + std::to_string(fields[0]) + " is not " + std::to_string(kTokenFileMagic));
  }
  if (fields[1] != kTokenFileVersion) {
    return malformed(path, "version " + std::to_string(fields[1]) + " is not 1 (uint16 tokens)");
  }
  const int64_t count = fields[2];
  const int64_t want = kTokenFileHeaderBytes + 2 * count;
  if (count < 0 || want != file_bytes) {
    return malformed(path, "the header says " + std::to_string(count) + " tokens (" + std::to_string(want) +
                               " bytes) but the file has " + std::to_string(file_bytes) + " bytes");
  }
  return count;
}

StatusOr<int64_t> read_token_count(const std::string& path) {
  ZDP_ASSIGN_OR_RETURN(const InputFile file, InputFile::open(path, "token file", kTokenFileMaxBytes));
  if (file.size() < kTokenFileHeaderBytes) return decode_token_header(nullptr, file.size(), path);
  char header[kTokenFileHeaderBytes];
  int64_t got = 0;
  while (got < kTokenFileHeaderBytes) {
    const ssize_t n = ::pread(file.fd(), header + got, static_cast<size_t>(kTokenFileHeaderBytes - got), got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(StatusCode::kIoError, "cannot read token file '" + path + "': " + std::strerror(errno));
    if (n == 0) return decode_token_header(nullptr, got, path);  // shrank since the open
    got += n;
  }
  return decode_token_header(header, file.size(), path);
}

Status check_holds_a_sample(const std::string& path, int64_t tokens, int seq_len) {
  if (tokens >= int64_t{seq_len} + 1) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, "token file '" + path + "': " + std::to_string(tokens) +
                                                  " tokens, fewer than model.seq_len + 1 = " +
                                                  std::to_string(int64_t{seq_len} + 1) + " (one sample)");
}

}  // namespace zdp
