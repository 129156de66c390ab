// The header of a token file in llm.c's .bin format (also what nanoGPT-style pipelines
// write through llm.c's tools): 256 little-endian int32 -- magic 20240520, version 1, the
// token count -- followed by that many uint16 tokens. Below the trainer so that dp-launch
// checks the token files' headers and lengths (check_input_paths, --dry-run included) with
// the very rules the ranks open them by (trainer/data/token_file.h).
#pragma once

#include <cstdint>
#include <string>

#include "zdp/status.h"

namespace zdp {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;
// The largest file the format can describe: an int32 count of uint16 tokens.
inline constexpr int64_t kTokenFileMaxBytes = kTokenFileHeaderBytes + 2 * int64_t{INT32_MAX};

// The token count that the header at `header` (kTokenFileHeaderBytes bytes; may be null
// when file_bytes is shorter) declares for a file of `file_bytes` bytes; kInvalidArgument,
// naming `path`, for a short file, a wrong magic or version, or a count that disagrees
// with the size. Pure (the fuzz target tests/fuzz/token_header_fuzz.cc calls it).
StatusOr<int64_t> decode_token_header(const void* header, int64_t file_bytes, const std::string& path);

// Opens `path` as InputFile does (a folder, FIFO or device refused without blocking),
// reads its header only and returns the token count decode_token_header finds.
StatusOr<int64_t> read_token_count(const std::string& path);

// kInvalidArgument naming `path` when its `tokens` are fewer than one sample of a model
// of `seq_len`: seq_len + 1 tokens (the inputs and the next-token labels).
Status check_holds_a_sample(const std::string& path, int64_t tokens, int seq_len);

}  // namespace zdp
