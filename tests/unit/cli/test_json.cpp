// JSON string literals (cli/json.hpp): valid JSON and valid UTF-8 for any bytes; ill-formed UTF-8
// replaced as Python's bytes.decode("utf-8", "replace") replaces it.
#include "cli/json.hpp"

#include <gtest/gtest.h>

#include <string>

namespace rcsweep::cli {
namespace {

TEST(JsonString, QuotesBackslashesAndControlCharactersAreEscaped) {
  EXPECT_EQ(json_string("plain text"), "\"plain text\"");
  EXPECT_EQ(json_string("a \"b\" \\c"), "\"a \\\"b\\\" \\\\c\"");
  EXPECT_EQ(json_string("1\n2\t3\r4"), "\"1\\n2\\t3\\r4\"");
  EXPECT_EQ(json_string(std::string("\x1b[31m\x7f", 6)), "\"\\u001B[31m\\u007F\"");
  EXPECT_EQ(json_string(std::string("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(json_string(""), "\"\"");
}

TEST(JsonString, WellFormedUtf8IsKept) {
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";  // é € 😀 U+10FFFF
  EXPECT_EQ(json_string(text), "\"" + text + "\"");
}

TEST(JsonString, EachMaximalIllFormedSubpartIsOneReplacementCharacter) {
  const auto q = [](const char* s) { return json_string(s); };
  EXPECT_EQ(q("st\xFF.h5"), "\"st\\uFFFD.h5\"");   // a byte that starts nothing
  EXPECT_EQ(q("\x80\x80"), "\"\\uFFFD\\uFFFD\"");  // stray continuation bytes
  EXPECT_EQ(q("\xE2\x82"
              "a"),
            "\"\\uFFFDa\"");                                             // a cut sequence: one
  EXPECT_EQ(q("\xF0\x9F\x98"), "\"\\uFFFD\"");                           // cut by the end
  EXPECT_EQ(q("\xC0\xAF"), "\"\\uFFFD\\uFFFD\"");                        // overlong
  EXPECT_EQ(q("\xE0\x80"), "\"\\uFFFD\\uFFFD\"");                        // overlong
  EXPECT_EQ(q("\xED\xA0\x80"), "\"\\uFFFD\\uFFFD\\uFFFD\"");             // a surrogate
  EXPECT_EQ(q("\xF4\x90\x80\x80"), "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\"");  // above U+10FFFF
  EXPECT_EQ(q("\xF8\x88\x80\x80\x80"), "\"\\uFFFD\\uFFFD\\uFFFD\\uFFFD\\uFFFD\"");
}

TEST(JsonString, AnyByteGivesPrintableAsciiOrWellFormedUtf8) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string out = json_string(all + all);
  for (unsigned char c : out) EXPECT_TRUE(c >= 0x20 && c != 0x7F) << int(c);
  // The only bytes >= 0x80 kept are the well-formed two-byte sequences: none in 0..255 in order.
  for (unsigned char c : out) EXPECT_LT(c, 0x80) << int(c);
}

}  // namespace
}  // namespace rcsweep::cli
