// [sweep.replicates] min/max/step/targets: parsed, canonical, and every mistake named by its key.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::dump;
using test::expect_only;
using test::issues_of;

const std::string head = "[sweep]\nname = \"a\"\nseed = 3\n";
const std::string model = "[model]\nT = 8\nd = 8\ndepth = 4\n[axes]\nlambda = [0.0, 1.0]\n";

std::string adaptive(const std::string& body) { return head + model + "[sweep.replicates]\n" + body; }

const std::string good = "min = 4\nmax = 30\nstep = 2\n"
                         "targets = [{ metric = \"sr_cov\", layer = \"last\", rel_se = 0.02 },\n"
                         "           { metric = \"mu\", layer = 2, abs_se = 1e-3, rel_se = 0.5 }]\n";

TEST(AdaptiveReplicates, ParsedIntoTheRule) {
  const SweepSpec s = parse_sweep(adaptive(good));
  EXPECT_TRUE(s.adaptive.enabled());
  EXPECT_EQ(s.replicates, 30);  // max: task ids are point * 30 + replicate
  EXPECT_EQ(s.adaptive.min, 4);
  EXPECT_EQ(s.adaptive.step, 2);
  ASSERT_EQ(s.adaptive.targets.size(), 2u);
  EXPECT_EQ(s.adaptive.targets[0], (ReplicateTarget{"sr_cov", -1, 0.02, 0.0}));
  EXPECT_EQ(s.adaptive.targets[1], (ReplicateTarget{"mu", 2, 0.5, 1e-3}));
  EXPECT_FALSE(parse_sweep(head + "replicates = 5\n" + model).adaptive.enabled());
}

TEST(AdaptiveReplicates, CanonicalTextRoundTripsAndNamesTheRule) {
  const SweepSpec s = parse_sweep(adaptive(good));
  const SweepSpec again = parse_sweep(s.canonical_toml(), "canonical");
  EXPECT_EQ(again.adaptive, s.adaptive);
  EXPECT_EQ(again.replicates, s.replicates);
  EXPECT_EQ(again.canonical_toml(), s.canonical_toml());
  // Another rule is another sweep; a fixed count of max replicates too.
  EXPECT_NE(parse_sweep(adaptive(good)).plan_hash(),
            parse_sweep(adaptive("min = 4\nmax = 30\nstep = 4\ntargets = [{ metric = \"sr_cov\", rel_se = 0.02 }]\n"))
                .plan_hash());
  EXPECT_NE(s.plan_hash(), parse_sweep(head + "replicates = 30\n" + model).plan_hash());
  // The fixed form keeps its canonical text (older stores' plan hashes stay valid).
  EXPECT_NE(parse_sweep(head + "replicates = 5\n" + model).canonical_toml().find("replicates = 5\n"),
            std::string::npos);
}

TEST(AdaptiveReplicates, CountsNamedWhenMissingOrOutOfRange) {
  const std::string targets = "targets = [{ metric = \"sr_cov\", rel_se = 0.1 }]\n";
  expect_only(adaptive("max = 10\nstep = 2\n" + targets), "sweep.replicates.min", {"required"});
  expect_only(adaptive("min = 1\nmax = 10\nstep = 2\n" + targets), "sweep.replicates.min", {"from 2", "integer 1"});
  expect_only(adaptive("min = 12\nmax = 10\nstep = 2\n" + targets), "sweep.replicates.min", {"<= max (10)"});
  expect_only(adaptive("min = 2\nmax = 10\nstep = 0\n" + targets), "sweep.replicates.step", {"from 1"});
  expect_only(adaptive("min = 2\nmax = 10.5\nstep = 1\n" + targets), "sweep.replicates.max", {"integer"});
  expect_only(adaptive("min = 2\nmax = 10\nstep = 1\nstop = 3\n" + targets), "sweep.replicates.stop",
              {"unknown key 'stop'", "did you mean 'step'?"});
  expect_only(head + "replicates = \"many\"\n" + model, "sweep.replicates", {"an integer >= 1 or a table"});
}

TEST(AdaptiveReplicates, TargetsNamedByTheirIndex) {
  const std::string counts = "min = 2\nmax = 10\nstep = 2\n";
  expect_only(adaptive(counts), "sweep.replicates.targets", {"required", "rel_se = 0.02"});
  expect_only(adaptive(counts + "targets = []\n"), "sweep.replicates.targets", {"non-empty"});
  expect_only(
      adaptive(counts + "targets = [{ metric = \"sr_cov\", rel_se = 0.1 }, { metric = \"sr_cv\", rel_se = 0.1 }]\n"),
      "sweep.replicates.targets[1].metric", {"per-layer metric", "did you mean 'sr_cov'?"});
  expect_only(adaptive(counts + "targets = [{ metric = \"sr_cov\", layer = 5, abs_se = 0.1 }]\n"),
              "sweep.replicates.targets[0].layer", {"beyond the sweep's depth 4"});
  expect_only(adaptive(counts + "targets = [{ metric = \"sr_cov\", layer = \"first\", abs_se = 0.1 }]\n"),
              "sweep.replicates.targets[0].layer", {"\"last\" or a layer"});
  expect_only(adaptive(counts + "targets = [{ metric = \"sr_cov\", rel_se = -0.1 }]\n"),
              "sweep.replicates.targets[0].rel_se", {"> 0"});
  expect_only(adaptive(counts + "targets = [{ metric = \"sr_cov\" }]\n"), "sweep.replicates.targets[0]",
              {"needs rel_se", "abs_se"});
  expect_only(adaptive(counts + "targets = [{ rel_se = 0.1 }]\n"), "sweep.replicates.targets[0].metric", {"required"});
  expect_only(adaptive(counts + "targets = [{ metric = \"s1\", abs_se = 1, se = 2 }]\n"),
              "sweep.replicates.targets[0].se", {"unknown key 'se'"});
  expect_only(adaptive(counts + "targets = [\"sr_cov\"]\n"), "sweep.replicates.targets[0]", {"must be a table"});
}

TEST(AdaptiveReplicates, AllProblemsReportedTogether) {
  const auto issues = issues_of(adaptive("min = 0\nmax = 10\nstep = -1\ntargets = [{ metric = \"x\", rel_se = 0 }]\n"));
  EXPECT_EQ(issues.size(), 4u) << dump(issues);
}

}  // namespace
}  // namespace rcsweep::config
