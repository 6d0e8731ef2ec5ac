// Token ids files: parsing, each refusal with its message (file, line, column), padding and mask.
#include "checkpoint/token_file.hpp"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "checkpoint_test_support.hpp"

namespace rcsweep::checkpoint {
namespace {

using test::config_error;
using test::TempDir;
using test::write_bytes;
using Ids = std::vector<std::int64_t>;

TEST(TokenFile, ParsesExcerptsOfDifferentLengthsSkippingBlanksAndComments) {
  TempDir dir;
  write_bytes(dir / "tokens.txt",
              "# synthetic ids\n"
              "101 7592 2088 102\n"
              "\n"
              "   \t\n"
              "  # an indented comment\n"
              "\t101  2023\t102   \r\n"  // tabs, runs of blanks, a CRLF line end
              "0 007 9007199254740992\n"
              "5");  // a last line without a line break
  const TokenFile f = read_token_file(dir / "tokens.txt");
  EXPECT_EQ(f.file, (dir / "tokens.txt").string());
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f.excerpts[0], (Ids{101, 7592, 2088, 102}));
  EXPECT_EQ(f.excerpts[1], (Ids{101, 2023, 102}));
  EXPECT_EQ(f.excerpts[2], (Ids{0, 7, std::int64_t{1} << 53}));
  EXPECT_EQ(f.excerpts[3], (Ids{5}));
  EXPECT_EQ(f.lines, (std::vector<std::size_t>{2, 6, 7, 8}));
  EXPECT_EQ(f.longest(), 4u);
  // the text and the stream readers agree with the file reader
  const std::string text = "1 2 3\n\n# c\n4\n";
  const TokenFile t = parse_token_text(text, "t.txt");
  std::istringstream in(text);
  const TokenFile s = read_token_file(in, "t.txt");
  EXPECT_EQ(t.excerpts, (std::vector<Ids>{{1, 2, 3}, {4}}));
  EXPECT_EQ(s.excerpts, t.excerpts);
  EXPECT_EQ(s.lines, (std::vector<std::size_t>{1, 4}));
  EXPECT_EQ(t.lines, s.lines);
}

// Every refusal, through the stream reader and the text reader: the same message.
void expect_refused(const std::string& text, const std::string& want, const TokenFileLimits& limits = {}) {
  std::istringstream in(text);
  const std::string from_stream = config_error([&] { (void)read_token_file(in, "ids.txt", limits); });
  const std::string from_text = config_error([&] { (void)parse_token_text(text, "ids.txt", limits); });
  EXPECT_EQ(from_stream, "ids.txt: " + want);
  EXPECT_EQ(from_text, "ids.txt: " + want);
}

TEST(TokenFile, RefusesBadTokensNamingFileLineAndColumn) {
  expect_refused("1 2\n3 x4 5\n", "line 2, column 3: token \"x4\" is not a token id (a non-negative decimal integer)");
  expect_refused("1 -5\n", "line 1, column 3: token \"-5\" is negative: a token id is a non-negative decimal integer");
  expect_refused("+5\n", "line 1, column 1: token \"+5\" is not a token id (a non-negative decimal integer)");
  expect_refused("1.0\n", "line 1, column 1: token \"1.0\" is not a token id (a non-negative decimal integer)");
  expect_refused("1,2\n", "line 1, column 1: token \"1,2\" is not a token id (a non-negative decimal integer)");
  expect_refused("-\n", "line 1, column 1: token \"-\" is not a token id (a non-negative decimal integer)");
  expect_refused("1 2 # ids\n",
                 "line 1, column 5: token \"#\" is not a token id (a non-negative decimal integer); '#' starts a "
                 "comment only at the start of a line");
  expect_refused("9007199254740993\n",
                 "line 1, column 1: token \"9007199254740993\" is above 2^53 = 9007199254740992, the largest token id "
                 "accepted");
  expect_refused(
      "1 99999999999999999999999999999999999999\n",
      "line 1, column 3: token \"99999999999999999999999999999999...\" is above 2^53 = 9007199254740992, the "
      "largest token id accepted");
  expect_refused(std::string("1 2\x01\xff\n", 6),
                 "line 1, column 3: token \"2??\" is not a token id (a non-negative decimal integer)");
  expect_refused(std::string("1\0002\n", 4),
                 "line 1, column 1: token \"1?2\" is not a token id (a non-negative decimal integer)");
}

TEST(TokenFile, RefusesEmptyFilesLongLinesAndTooManyExcerpts) {
  expect_refused("", "holds no excerpt: it is empty or every line is blank or a comment");
  expect_refused("\n  \n# only a comment\n", "holds no excerpt: it is empty or every line is blank or a comment");
  const TokenFileLimits small{.line_bytes = 8, .excerpts = 2};
  expect_refused("1 2 3 4\n1 2 3 4 5\n", "line 2 is longer than 8 characters, the longest line a token file may have",
                 small);
  expect_refused("# a comment of more than 8 characters\n1\n",
                 "line 1 is longer than 8 characters, the longest line a token file may have", small);
  expect_refused("1\n\n2\n# c\n3\n", "line 5: more than 2 excerpts, the most a token file may hold", small);
  // at the limits: accepted (a line of exactly 8 characters, with and without its line break)
  std::istringstream exact("1 2 3 45\n6 7 8 90");
  EXPECT_EQ(read_token_file(exact, "ids.txt", small).excerpts, (std::vector<Ids>{{1, 2, 3, 45}, {6, 7, 8, 90}}));
  EXPECT_EQ(parse_token_text("1 2 3 45\n6 7 8 90\n", "ids.txt", small).size(), 2u);
  // the default limits: a line of 2^20 characters is read, one more is refused
  const TokenFileLimits limits;
  std::string line(limits.line_bytes, ' ');
  line[0] = '7';
  std::istringstream long_ok(line + "\n");
  EXPECT_EQ(read_token_file(long_ok, "ids.txt").excerpts, (std::vector<Ids>{{7}}));
  expect_refused(line + " \n", "line 1 is longer than 1048576 characters, the longest line a token file may have");
}

TEST(TokenFile, RefusesMissingFilesAndFolders) {
  TempDir dir;
  const std::string missing = (dir / "nope.txt").string();
  EXPECT_EQ(config_error([&] { (void)read_token_file(missing); }), missing + ": no such file");
  EXPECT_EQ(config_error([&] { (void)read_token_file(dir.path()); }), dir.path().string() + ": is not a regular file");
  write_bytes(dir / "empty.txt", "");
  EXPECT_EQ(config_error([&] { (void)read_token_file(dir / "empty.txt"); }),
            (dir / "empty.txt").string() + ": holds no excerpt: it is empty or every line is blank or a comment");
}

TEST(TokenFile, PadsWithThePadIdAndMasksThePadding) {
  const TokenFile f = parse_token_text("# x\n5 6 7\n8\n", "ids.txt");
  const PaddedTokens a = f.padded(0, 5, 1);
  EXPECT_EQ(a.ids, (Ids{5, 6, 7, 1, 1}));
  EXPECT_EQ(a.real, (std::vector<bool>{true, true, true, false, false}));
  const PaddedTokens b = f.padded(1, 3, 0);
  EXPECT_EQ(b.ids, (Ids{8, 0, 0}));
  EXPECT_EQ(b.real, (std::vector<bool>{true, false, false}));
  const PaddedTokens exact = f.padded(0, 3, 0);  // no padding at the excerpt's own length
  EXPECT_EQ(exact.ids, (Ids{5, 6, 7}));
  EXPECT_EQ(exact.real, (std::vector<bool>(3, true)));
  // a padded id equal to a real one stays real where the excerpt has it: the mask is by position
  const PaddedTokens same = pad_tokens(Ids{0, 3}, 4, 0);
  EXPECT_EQ(same.ids, (Ids{0, 3, 0, 0}));
  EXPECT_EQ(same.real, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(config_error([&] { (void)f.padded(0, 2, 0); }),
            "ids.txt: line 2: excerpt 0 has 3 tokens, more than the length 2 asked for");
  EXPECT_THROW((void)f.padded(2, 5, 0), Error);
  EXPECT_THROW((void)pad_tokens(Ids{1}, 4, -1), Error);
  EXPECT_THROW((void)pad_tokens(Ids{1, 2}, 1, 0), Error);
}

TEST(TokenFile, ChecksIdsAgainstAVocabulary) {
  const TokenFile f = parse_token_text("1 2 30\n\n4 50 6\n", "ids.txt");
  EXPECT_NO_THROW(f.check_vocabulary(51));
  EXPECT_EQ(config_error([&] { f.check_vocabulary(30); }),
            "ids.txt: line 1, token 3: id 30 is not below the vocabulary size 30\n"
            "ids.txt: line 3, token 2: id 50 is not below the vocabulary size 30");
  std::string many;
  for (int i = 0; i < 25; ++i) many += "100\n";
  EXPECT_NE(config_error([&] {
              parse_token_text(many, "ids.txt").check_vocabulary(100);
            }).find("ids.txt: and 5 more ids outside the vocabulary"),
            std::string::npos);
}

}  // namespace
}  // namespace rcsweep::checkpoint
