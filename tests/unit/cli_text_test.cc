#include "tools/fgemma/cli_text.h"

#include <gtest/gtest.h>

namespace fg::cli {
namespace {

TEST(CliTextTest, Utf8Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("turn the light on"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x92\xa1"));
  EXPECT_FALSE(IsValidUtf8("\xff"));                  // never a lead byte
  EXPECT_FALSE(IsValidUtf8("\xc3"));                  // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));          // overlong, 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));          // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ok\x80"));                // lone continuation byte
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x92\xa1", 0), 4u);
}

TEST(CliTextTest, PrintableEscapesControlsAndBadBytesKeepsCharacters) {
  EXPECT_EQ(Printable("a\nb\tc\\d\r"), "a\\nb\\tc\\\\d\\r");
  EXPECT_EQ(Printable(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(Printable("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(Printable("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(Printable("abcdef", 3), "abc... (6 bytes)");
  // A cut never splits a character.
  EXPECT_EQ(Printable("\xe6\x97\xa5\xe6\x97\xa5", 4), "\xe6\x97\xa5\xe6\x97\xa5");
}

}  // namespace
}  // namespace fg::cli
