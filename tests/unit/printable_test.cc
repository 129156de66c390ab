// core/internal/printable.h: text from files and the network reaches a terminal without
// its control characters.
#include "core/internal/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace zdp {
namespace {

TEST(Printable, ControlCharactersAreEscapedAndTheRestKept) {
  EXPECT_EQ(printable("w\x1b[31mRED\x1b[0m\r\nFAKE"), "w\\x1b[31mRED\\x1b[0m\\x0d\\x0aFAKE");
  EXPECT_EQ(printable(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(printable("h.weight \xc3\xa9"), "h.weight \xc3\xa9");  // UTF-8 stays
}

TEST(Printable, LongTextIsCutSayingItsLength) {
  EXPECT_EQ(printable(std::string(300, 'x'), 4), "xxxx... (300 bytes)");
  EXPECT_EQ(printable("abcd", 4), "abcd");
}

}  // namespace
}  // namespace zdp
