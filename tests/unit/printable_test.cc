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
  EXPECT_EQ(printable("a\xc2\x9b" "31mb"), "a\\u009b31mb");      // C1's CSI, in UTF-8
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");                  // a no-break space is text
}

TEST(Printable, LongTextIsCutSayingItsLength) {
  EXPECT_EQ(printable(std::string(300, 'x'), 4), "xxxx... (300 bytes)");
  EXPECT_EQ(printable("abcd", 4), "abcd");
}

}  // namespace
}  // namespace zdp
