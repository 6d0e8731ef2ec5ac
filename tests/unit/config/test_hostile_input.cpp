// Hostile input to the sweep file (docs/CONFIG.md "Limits"): huge keys, a flood of problems, counts
// past their maximum; every one a ConfigError naming the key and the problem, never a crash, a hang
// or a long computation. Files that are not regular: test_sweep_file.cpp; deep nesting:
// test_nesting.cpp; what a store would hold: test_sweep_checks.cpp.
#include <gtest/gtest.h>

#include <string>

#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::good;
using test::only_issue;
using test::with;

TEST(HugeKeys, AreCutInMessagesAndNotCompared) {
  // a 15 MB key took minutes and gigabytes in the "did you mean" edit distance, and was printed twice
  const auto issue = only_issue(good + std::string(15'000'000, 'k') + " = 1\n");
  EXPECT_EQ(issue.key, "model." + std::string(194, 'k') + "... (15000006 bytes)");
  EXPECT_LE(issue.problem.size(), 2100u);
  EXPECT_EQ(issue.problem.rfind("unknown parameter 'kkk", 0), 0u) << issue.problem.substr(0, 100);
  EXPECT_EQ(nearest(std::string(1000, 'T'), {"T", "d"}), "");
  EXPECT_EQ(nearest("lamdba", {"lambda", "d"}), "lambda");
}

TEST(HugeKeys, AtMostAHundredProblemsAreListed) {
  std::string text = good;
  for (int i = 0; i < 1000; ++i) text += "k" + std::to_string(i) + " = 1\n";
  const auto issues = test::issues_of(text);
  ASSERT_EQ(issues.size(), 101u);
  EXPECT_EQ(issues[0].key, "model.k0");
  EXPECT_EQ(issues[99].key, "model.k99");
  EXPECT_EQ(issues[100].key, "");
  EXPECT_EQ(issues[100].problem, "and 900 more problems: only the first 100 are listed");
}

TEST(Bounds, EveryCountHasAStatedMaximum) {
  test::expect_only(with("depth = 2", "depth = 2147483647"), "model.depth",
                    {"must be <= 100000, got 2147483647 (docs/CONFIG.md \"Limits\")"});
  test::expect_only(with("T = 4", "T = 32769"), "model.T", {"must be <= 32768, got 32769"});
  test::expect_only(with("d = 8", "d = 32769"), "model.d", {"must be <= 32768, got 32769"});
  test::expect_only(with("depth = 2", "depth = 2\nheads = 257"), "model.heads", {"must be <= 256, got 257"});
  test::expect_only(with("depth = 2", "depth = 2\nmlp_ratio = 65"), "model.mlp_ratio", {"must be <= 64, got 65"});
  test::expect_only(with("depth = 2", "depth = 2\nstate_dim = 32769"), "model.state_dim", {"must be <= 32768"});
  test::expect_only(with("depth = 2", "depth = 2\nd_qk = 32769"), "model.d_qk", {"must be <= 32768"});
  // at the bounds: accepted
  const SweepSpec edge = parse_sweep(
      with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 100000\nheads = 256"));
  EXPECT_EQ(edge.max_depth(), 100000);
}

}  // namespace
}  // namespace rcsweep::config
