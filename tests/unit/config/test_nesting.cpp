// The bound on nesting (config/nesting.cpp): deep table headers, dotted keys, arrays and inline
// tables in a sweep file or an override are refused before toml++ reads them, at their line and
// column; strings and comments do not count.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/nesting.hpp"
#include "config/overrides.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::good;
using test::only_issue;

std::string repeat(const std::string& part, std::size_t n, const std::string& sep = "") {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? sep : "") + part;
  return out;
}

TEST(Nesting, DeepTableHeaderIsRefusedBeforeToml) {
  // 50 000 dotted parts overflowed toml++'s stack (SIGSEGV).
  const auto issue = only_issue("[" + repeat("a", 50000, ".") + "]\nx = 1\n");
  EXPECT_EQ(issue.key, "");
  EXPECT_EQ(issue.problem,
            "TOML nesting too deep in bad.toml at line 1, column 129: more than 64 levels of tables, dotted key "
            "parts, arrays and inline tables (a sweep file needs about 5)");
  EXPECT_NE(only_issue("[[" + repeat("a", 50000, ".") + "]]\n").problem.find("at line 1, column 130"),
            std::string::npos);
}

TEST(Nesting, DeepDottedKeysArraysAndInlineTablesAreRefused) {
  const std::string head = "[sweep]\nname = \"x\"\n[model]\nT = 1\nd = 1\ndepth = 1\n";
  EXPECT_NE(only_issue(head + repeat("a", 50000, ".") + " = 1\n").problem.find("at line 7, column 126"),
            std::string::npos);
  EXPECT_NE(only_issue(head + "x = " + repeat("[", 30000) + repeat("]", 30000) + "\n").problem.find("line 7"),
            std::string::npos);
  EXPECT_NE(only_issue(head + "x = " + repeat("{a = ", 30000) + "1" + repeat("}", 30000) + "\n")
                .problem.find("TOML nesting too deep"),
            std::string::npos);
  // strings and comments do not count; the position counts their lines
  const std::string quoted = "s = \"" + repeat("[", 100) + "\"\n# " + repeat("{", 100) + "\nm = \"\"\"\n" +
                             repeat("a.", 100) + "\n\"\"\"\nl = '" + repeat("[", 100) + "'\n";
  EXPECT_FALSE(too_deep(quoted).has_value());
  const auto pos = too_deep(quoted + "y = " + repeat("[", 65) + repeat("]", 65) + "\n");
  ASSERT_TRUE(pos.has_value());
  EXPECT_EQ(pos->line, 7u);
  EXPECT_EQ(pos->column, 4u + 64u);  // y, then the 64th array
}

TEST(Nesting, BoundIsSixtyFourLevels) {
  // under [a.b.c] (3 levels), x = [[1]] reaches 6: the key, then one per array
  EXPECT_FALSE(too_deep("[a.b.c]\nx = [[1]]\n", max_nesting - 6).has_value());
  EXPECT_TRUE(too_deep("[a.b.c]\nx = [[1]]\n", max_nesting - 5).has_value());
  EXPECT_FALSE(too_deep("[" + repeat("a", 64, ".") + "]\n").has_value());
  EXPECT_TRUE(too_deep("[" + repeat("a", 65, ".") + "]\n").has_value());
  EXPECT_FALSE(too_deep("x = " + repeat("[", 63) + repeat("]", 63)).has_value());  // x, then 63 arrays
  EXPECT_TRUE(too_deep("x = " + repeat("[", 64) + repeat("]", 64)).has_value());
  EXPECT_TRUE(too_deep("[" + repeat("a", 32, ".") + "]\n" + repeat("b", 33, ".") + " = 1\n").has_value());
  EXPECT_FALSE(too_deep("[" + repeat("a", 32, ".") + "]\n" + repeat("b", 32, ".") + " = 1\n").has_value());
}

TEST(Nesting, EveryShippedSweepFileIsWellWithinTheBound) {
  const std::filesystem::path root = RCSWEEP_SOURCE_DIR;
  int files = 0;
  for (const char* dir :
       {"jobs/examples", "bench/sweeps", "tests/e2e/data", "tests/fuzz/store_plans", "tests/fuzz/corpus/config"})
    for (const auto& entry : std::filesystem::directory_iterator(root / dir)) {
      if (entry.path().extension() != ".toml") continue;
      ++files;
      EXPECT_FALSE(too_deep(read_sweep_file(entry.path()), max_nesting - 58).has_value()) << entry.path();
    }
  EXPECT_GT(files, 10);
}

TEST(Nesting, DeepOverrideValueIsRefusedNamingTheKey) {
  // 30 000 nested lists overflowed the stack of the bare-word list reader.
  for (const std::string inner : {"", "x", "0"}) {
    const std::string text = "axes.lambda=" + repeat("[", 30000) + inner + repeat("]", 30000);
    try {
      parse_override(text);
      FAIL() << "accepted";
    } catch (const ConfigError& e) {
      ASSERT_EQ(e.issues().size(), 1u);
      EXPECT_EQ(e.issues()[0].key, "axes.lambda");
      const std::string& p = e.issues()[0].problem;
      EXPECT_NE(p.find("... (" + std::to_string(text.size()) +
                       " characters)': the value nests deeper than 64 levels (with the key's parts) at character 63"),
                std::string::npos)
          << p.substr(0, 400);
      EXPECT_LT(p.size(), 400u);
    }
  }
  const auto issue = only_issue(good, {"model.x={" + repeat("a", 3000, ".") + " = 1}"});
  EXPECT_EQ(issue.key, "model.x");
  EXPECT_NE(issue.problem.find("nests deeper than 64 levels"), std::string::npos) << issue.problem;
  EXPECT_NO_THROW(parse_override("axes.lambda=" + repeat("[", 62) + "1" + repeat("]", 62)));
}

TEST(Nesting, OverrideKeyOfTooManyPartsIsRefused) {
  const auto issue = only_issue(good, {repeat("a", 30000, ".") + "=1"});
  EXPECT_EQ(issue.key, "");
  EXPECT_NE(issue.problem.find("... (60001 characters)': the key has more than 64 parts (tables and indices)"),
            std::string::npos)
      << issue.problem.substr(0, 400);
  EXPECT_NE(only_issue(good, {"zip" + repeat("[0]", 100) + "=1"}).problem.find("more than 64 parts"),
            std::string::npos);
}

}  // namespace
}  // namespace rcsweep::config
