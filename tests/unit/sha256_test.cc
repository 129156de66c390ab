// Sha256 (core/internal/sha256.h) against the FIPS 180-4 / NIST examples and sha256sum's
// well-known digests, in one update and split at every offset across the block boundary.
#include <gtest/gtest.h>

#include <string>

#include "core/internal/sha256.h"

namespace zdp {
namespace {

std::string digest(const std::string& s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return h.finish_hex();
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks: the 56-byte message whose padding needs a second block.
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesGiveTheSameDigest) {
  std::string s;
  for (int i = 0; i < 200; ++i) s += static_cast<char>(i * 7 + 3);
  const std::string whole = digest(s);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    Sha256 h;
    h.update(s.data(), cut);
    h.update(s.data() + cut, s.size() - cut);
    ASSERT_EQ(h.finish_hex(), whole) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace zdp
