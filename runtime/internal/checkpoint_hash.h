// Checkpoint checksums: XXH3-64 (libxxhash) of fixed-size chunks of a file's data region,
// so that any set of ranks can compute them in parallel and a reader can verify a chunk
// from that chunk alone (zdp/checkpoint.h, "Checksums").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zdp/safetensors.h"
#include "zdp/status.h"

namespace zdp::checkpoint {

uint64_t hash_bytes(const void* data, size_t bytes);
// 16 lower-case hex digits, and back (kInvalidArgument naming `where` when malformed).
std::string hash_hex(uint64_t hash);
StatusOr<uint64_t> parse_hash_hex(const std::string& text, const std::string& where);

// Chunks of a data region of `data_bytes` bytes (the last one may be short).
int64_t chunk_count(int64_t data_bytes, int64_t chunk_bytes);
// [first, second) byte range of chunk `chunk` in the data region.
struct ChunkRange {
  int64_t begin = 0;
  int64_t end = 0;
};
ChunkRange chunk_range(int64_t chunk, int64_t data_bytes, int64_t chunk_bytes);

// Reads chunk `chunk` of `file` into `buffer` (resized to fit) and returns its hash.
StatusOr<uint64_t> hash_chunk(const safetensors::Reader& file, int64_t chunk, int64_t chunk_bytes,
                              std::vector<char>& buffer);

// "model.safetensors: chunk 3 (data bytes [12582912, 16777216)) has checksum 0123..., state.json
// says 4567...": the message of a mismatch.
std::string mismatch_message(const std::string& file, int64_t chunk, ChunkRange range, uint64_t found,
                             uint64_t expected);

}  // namespace zdp::checkpoint
