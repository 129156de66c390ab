// XXH3-64 chunk checksums of checkpoint files (checkpoint_hash.h). XXH3 runs at memory
// speed, so verifying costs about as much as reading.
#include "runtime/internal/checkpoint_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

#include "core/internal/printable.h"

namespace zdp::checkpoint {

uint64_t hash_bytes(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

StatusOr<uint64_t> parse_hash_hex(const std::string& text, const std::string& where) {
  uint64_t value = 0;
  bool good = text.size() == 16;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) good = false;
    value = (value << 4) | static_cast<uint64_t>(digit & 0xf);
  }
  if (!good) return Status(StatusCode::kInvalidArgument, where + ": '" + printable(text, 64) + "' is not a 16-digit hex checksum");
  return value;
}

int64_t chunk_count(int64_t data_bytes, int64_t chunk_bytes) {
  return chunk_bytes > 0 ? (data_bytes + chunk_bytes - 1) / chunk_bytes : 0;
}

ChunkRange chunk_range(int64_t chunk, int64_t data_bytes, int64_t chunk_bytes) {
  const int64_t begin = chunk * chunk_bytes;
  return {begin, std::min(data_bytes, begin + chunk_bytes)};
}

StatusOr<uint64_t> hash_chunk(const safetensors::Reader& file, int64_t chunk, int64_t chunk_bytes,
                              std::vector<char>& buffer) {
  const ChunkRange r = chunk_range(chunk, file.header().data_bytes(), chunk_bytes);
  buffer.resize(static_cast<size_t>(r.end - r.begin));
  ZDP_RETURN_IF_ERROR(file.read(r.begin, buffer.data(), r.end - r.begin));
  return hash_bytes(buffer.data(), buffer.size());
}

std::string mismatch_message(const std::string& file, int64_t chunk, ChunkRange range, uint64_t found,
                             uint64_t expected) {
  return file + ": chunk " + std::to_string(chunk) + " (data bytes [" + std::to_string(range.begin) + ", " +
         std::to_string(range.end) + ")) has checksum " + hash_hex(found) + ", state.json says " + hash_hex(expected) +
         " (the file is damaged)";
}

}  // namespace zdp::checkpoint
