// Chunk checksums (runtime/internal/checkpoint_hash.h): chunks cover the data, the last
// one short, and the hash is XXH3-64 spelled as 16 hex digits.
#include "runtime/internal/checkpoint_hash.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace zdp {
namespace {

TEST(CheckpointHash, ChunksCoverTheDataAndTheLastOneIsShort) {
  EXPECT_EQ(checkpoint::chunk_count(0, 4), 0);
  EXPECT_EQ(checkpoint::chunk_count(8, 4), 2);
  EXPECT_EQ(checkpoint::chunk_count(9, 4), 3);
  EXPECT_EQ(checkpoint::chunk_range(2, 9, 4).begin, 8);
  EXPECT_EQ(checkpoint::chunk_range(2, 9, 4).end, 9);
  // XXH3-64 of the empty input, the library's published test vector.
  EXPECT_EQ(checkpoint::hash_hex(checkpoint::hash_bytes("", 0)), "2d06800538d394c2");
  EXPECT_EQ(checkpoint::parse_hash_hex("2d06800538d394c2", "x").value(), 0x2d06800538d394c2ull);
}

}  // namespace
}  // namespace zdp
