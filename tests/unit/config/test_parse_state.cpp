// The pieces a sweep document's walk is built of: the parse state (config/parse_state.hpp: the
// problem cap, where parameters are given, suggestions) and TOML nodes in messages
// (config/toml_nodes.hpp: descriptions, file order).
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/parse_state.hpp"
#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {
namespace {

TEST(ParseState, ProblemsPastTheCapAreOnlyCounted) {
  ParseState st;
  for (std::size_t i = 0; i < max_issues + 5; ++i) st.issue("k" + std::to_string(i), "bad");
  ASSERT_EQ(st.issues.size(), max_issues);
  EXPECT_EQ(st.issues.back().key, "k" + std::to_string(max_issues - 1));
  EXPECT_EQ(st.dropped, 5u);
  EXPECT_TRUE(st.full());
}

TEST(ParseState, AParameterIsClaimedOnceAndLocatedWhereItWasGiven) {
  ParseState st;
  EXPECT_TRUE(st.claim("lambda", "axes"));
  EXPECT_TRUE(st.claim("T", "model"));
  EXPECT_FALSE(st.claim("lambda", "zip[0]"));
  ASSERT_EQ(st.issues.size(), 1u);
  EXPECT_EQ(st.issues[0].key, "zip[0].lambda");
  EXPECT_EQ(st.issues[0].problem, "parameter 'lambda' is given in both axes and zip[0]; give it in one place only");
  EXPECT_EQ(st.location("lambda"), "axes.lambda");
  EXPECT_EQ(st.location("T"), "model.T");
  EXPECT_EQ(st.location("d"), "model.d");  // a default counts as [model]
  EXPECT_TRUE(st.swept("lambda"));
  EXPECT_FALSE(st.swept("T"));
  EXPECT_FALSE(st.swept("d"));
}

TEST(ParseState, AMisspeltParameterIsSuggestedAndNotAlsoMissing) {
  ParseState st;
  st.unknown_param("model.dpeth", "dpeth");
  ASSERT_EQ(st.issues.size(), 1u);
  EXPECT_EQ(st.issues[0].problem, "unknown parameter 'dpeth', did you mean 'depth'?");
  EXPECT_EQ(st.misplaced.count("depth"), 1u);
  st.unknown_param("model.input_matirx", "input_matirx");  // the extra [model] keys are suggested too
  EXPECT_EQ(st.issues[1].problem, "unknown parameter 'input_matirx', did you mean 'input_matrix'?");
  EXPECT_TRUE(is_model_extra("input_path"));
  EXPECT_FALSE(is_model_extra("lambda"));
}

TEST(ParseState, ATopLevelKeyThatIsNoTableIsReported) {
  ParseState st;
  const toml::table root = toml::parse("model = 3\n[axes]\n");
  EXPECT_EQ(st.require_table("model", *root.get("model")), nullptr);
  EXPECT_NE(st.require_table("axes", *root.get("axes")), nullptr);
  ASSERT_EQ(st.issues.size(), 1u);
  EXPECT_EQ(st.issues[0].key, "model");
  EXPECT_EQ(st.issues[0].problem, "must be a table ([model]), got an integer");
}

TEST(TomlNodes, EntriesComeInFileOrderNotSorted) {
  const toml::table t = toml::parse("zeta = 1\nalpha = 2\n  mid = 3\nb = 4\n");
  std::vector<std::string> keys;
  for (const auto& [key, node] : file_order(t)) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid", "b"}));
}

TEST(TomlNodes, DescriptionsNameTheTypeAndTheValue) {
  const toml::table t = toml::parse("s = \"x\\ty\"\ni = 3\nf = 0.5\nb = true\na = [1]\nt = {x = 1}\nd = 2024-01-02\n");
  EXPECT_EQ(describe(*t.get("s")), "a string \"x\\ty\"");
  EXPECT_EQ(describe(*t.get("i")), "an integer 3");
  EXPECT_EQ(describe(*t.get("f")), "a float 0.5");
  EXPECT_EQ(describe(*t.get("b")), "a boolean true");
  EXPECT_EQ(describe(*t.get("a")), "an array");
  EXPECT_EQ(describe(*t.get("t")), "a table");
  EXPECT_EQ(describe(*t.get("d")), "a date/time");
  EXPECT_EQ(type_name(*t.get("i")), "an integer");
  EXPECT_EQ(quote_list({"a", "b"}), "\"a\", \"b\"");
  EXPECT_EQ(suggestion("lamda", {"lambda", "T"}), ", did you mean 'lambda'?");
  EXPECT_EQ(suggestion("zzzzzz", {"lambda", "T"}), "");
}

}  // namespace
}  // namespace rcsweep::config::parsing
