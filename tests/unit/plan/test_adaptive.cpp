// plan/adaptive: the standard error test against a naive reference, and the replicate decisions
// (taken from a point's first k replicates only, whatever order results arrive in).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"
#include "metrics/metrics.hpp"
#include "plan/adaptive.hpp"

namespace rcsweep::plan {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

TEST(MeanSe, MatchesTheTextbookFormulaOverFiniteValues) {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> normal(3.0, 2.0);
  std::vector<double> v(37);
  for (auto& x : v) x = normal(gen);
  long double sum = 0, sq = 0;
  for (const double x : v) sum += x;
  const long double mean = sum / v.size();
  for (const double x : v) sq += (x - mean) * (x - mean);
  const double se = static_cast<double>(std::sqrt(sq / (v.size() - 1) / v.size()));
  auto with_gaps = v;
  with_gaps.insert(with_gaps.begin() + 3, nan);
  with_gaps.push_back(std::numeric_limits<double>::infinity());
  for (const auto& values : {v, with_gaps}) {
    const MeanSe s = mean_se(values);
    EXPECT_EQ(s.n, v.size());
    EXPECT_NEAR(s.mean, static_cast<double>(mean), 1e-14);
    EXPECT_NEAR(s.se, se, 1e-14);
  }
}

TEST(MeanSe, ExactForEqualValuesAndInfiniteBelowTwo) {
  EXPECT_EQ(mean_se(std::vector<double>(9, 0.5)).se, 0.0);
  const double se = mean_se(std::vector<double>(9, 0.1)).se;  // two passes: no cancellation, no NaN
  EXPECT_TRUE(se >= 0.0 && se < 1e-16) << se;
  EXPECT_EQ(mean_se(std::vector<double>{4.0, nan}).se, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(mean_se(std::vector<double>{}).mean));
}

TEST(TargetMet, RelativeAbsoluteAndBoth) {
  const MeanSe s{-10.0, 0.15, 5};
  EXPECT_TRUE(target_met({"mu", -1, 0.02, 0.0}, s));  // 0.15 <= 0.02 * |-10|
  EXPECT_FALSE(target_met({"mu", -1, 0.01, 0.0}, s));
  EXPECT_TRUE(target_met({"mu", -1, 0.0, 0.15}, s));
  EXPECT_FALSE(target_met({"mu", -1, 0.0, 0.1}, s));
  EXPECT_FALSE(target_met({"mu", -1, 0.02, 0.1}, s));  // both must hold
  EXPECT_FALSE(target_met({"mu", -1, 0.0, 1.0}, {1.0, std::numeric_limits<double>::infinity(), 1}));
}

/// A plan of `points` lambda values with [sweep.replicates] min/max/step and one abs_se target
/// on s1 of layer 1.
Plan adaptive_plan(int points, int min, int max, int step, double abs_se = 0.5) {
  std::string lambdas;
  for (int p = 0; p < points; ++p) lambdas += (p ? ", " : "") + std::to_string(p) + ".0";
  return make_plan(
      config::parse_sweep("[sweep]\nname = \"a\"\nseed = 1\n[sweep.replicates]\nmin = " + std::to_string(min) +
                              "\nmax = " + std::to_string(max) + "\nstep = " + std::to_string(step) +
                              "\ntargets = [{ metric = \"s1\", layer = 1, abs_se = " + std::to_string(abs_se) +
                              " }]\n[model]\nT = 4\nd = 4\ndepth = 2\n[axes]\nlambda = [" + lambdas + "]\n",
                          "test"));
}

std::vector<std::uint64_t> ids(std::uint64_t first, std::uint64_t last) {  // [first, last)
  std::vector<std::uint64_t> out(last - first);
  std::iota(out.begin(), out.end(), first);
  return out;
}

TEST(ReplicateRule, FirstMinThenStepsWhileTheSpreadIsTooLarge) {
  const Plan plan = adaptive_plan(2, 2, 7, 2);  // ids: point * 7 + replicate
  ReplicateRule rule(plan);
  for (std::uint64_t r = 0; r < 7; ++r) EXPECT_EQ(rule.needed(r), r < 2) << r;
  EXPECT_TRUE(rule.record(0, std::vector{0.0}).released.empty());  // replicate 1 still unknown
  auto d = rule.record(1, std::vector{4.0});                       // se 2 > 0.5: two more
  EXPECT_EQ(d.released, ids(2, 4));
  EXPECT_TRUE(d.not_needed.empty());
  EXPECT_TRUE(rule.needed(3) && !rule.needed(4));
  rule.record(2, std::vector{2.0});
  d = rule.record(3, std::vector{2.0});  // 0, 4, 2, 2: se 0.816 > 0.5
  EXPECT_EQ(d.released, ids(4, 6));
  rule.record(4, std::vector{2.0});
  d = rule.record(5, std::vector{2.0});  // six values: se 0.516 > 0.5: the last step is cut at max
  EXPECT_EQ(d.released, ids(6, 7));
  d = rule.record(6, std::vector{2.0});  // at max: nothing left to decide
  EXPECT_TRUE(d.released.empty() && d.not_needed.empty());
  EXPECT_EQ(rule.needed_count(0), 7);
  EXPECT_EQ(rule.needed_count(1), 2);  // the other point is untouched
}

TEST(ReplicateRule, TargetsMetMakeTheRestNotNeeded) {
  const Plan plan = adaptive_plan(1, 3, 9, 3);
  ReplicateRule rule(plan);
  rule.record(0, std::vector{1.0});
  rule.record(2, std::vector{1.2});
  const auto d = rule.record(1, std::vector{0.9});
  EXPECT_TRUE(d.released.empty());
  EXPECT_EQ(d.not_needed, ids(3, 9));
  for (std::uint64_t r = 3; r < 9; ++r) EXPECT_TRUE(rule.not_needed(r) && !rule.needed(r));
  EXPECT_FALSE(rule.not_needed(0));
}

TEST(ReplicateRule, AFailedReplicateHoldsItsPointUntilItIsRunAgain) {
  const Plan plan = adaptive_plan(1, 2, 6, 2);
  ReplicateRule rule(plan);
  rule.record(0, std::vector{1.0});
  auto d = rule.record(1, std::nullopt);
  EXPECT_TRUE(d.released.empty() && d.not_needed.empty());
  d = rule.record(1, std::vector{1.1});  // --retry-failed
  EXPECT_EQ(d.not_needed, ids(2, 6));
}

TEST(ReplicateRule, NonFiniteValuesDoNotCount) {
  const Plan plan = adaptive_plan(1, 3, 6, 3);
  ReplicateRule rule(plan);
  rule.record(0, std::vector{1.0});
  rule.record(1, std::vector{nan});  // e.g. a diverged replicate: two finite values remain
  EXPECT_EQ(rule.record(2, std::vector{1.1}).not_needed, ids(3, 6));
  ReplicateRule lone(plan);
  lone.record(0, std::vector{1.0});
  lone.record(1, std::vector{nan});
  EXPECT_EQ(lone.record(2, std::vector{nan}).released, ids(3, 6));  // one finite value: no standard error
  ReplicateRule none(plan);
  none.record(0, std::vector{nan});
  none.record(1, std::vector{nan});
  EXPECT_EQ(none.record(2, std::vector{nan}).not_needed, ids(3, 6));  // all diverged: more would not help
}

TEST(ReplicateRule, DecisionsDoNotDependOnTheOrderResultsArriveIn) {
  // Values whose spread shrinks: points need different numbers of replicates.
  const int points = 5, max = 12;
  const Plan plan = adaptive_plan(points, 2, max, 2, 0.3);
  const auto value = [](std::uint64_t id) {
    const double p = static_cast<double>(id / max), r = static_cast<double>(id % max);
    return std::sin(7.0 * r + p) * 3.0 / (1.0 + p * p * (r + 1.0));
  };
  // In order, replicate by replicate as a single rank would: the reference decisions.
  ReplicateRule ordered(plan);
  std::vector<std::uint64_t> pending;
  for (std::uint64_t id = 0; id < plan.tasks.size(); ++id)
    if (ordered.needed(id)) pending.push_back(id);
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const auto d = ordered.record(pending[i], std::vector{value(pending[i])});
    pending.insert(pending.end(), d.released.begin(), d.released.end());
  }
  std::vector<int> reference;
  for (int p = 0; p < points; ++p) reference.push_back(ordered.needed_count(static_cast<std::size_t>(p)));
  EXPECT_GT(*std::max_element(reference.begin(), reference.end()),
            *std::min_element(reference.begin(), reference.end()));
  // Any arrival order (results of released tasks shuffled in as they come): the same decisions.
  for (int trial = 0; trial < 20; ++trial) {
    std::mt19937 gen(static_cast<unsigned>(trial));
    ReplicateRule rule(plan);
    std::vector<std::uint64_t> open;
    for (std::uint64_t id = 0; id < plan.tasks.size(); ++id)
      if (rule.needed(id)) open.push_back(id);
    while (!open.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, open.size() - 1);
      const std::size_t i = pick(gen);
      const auto id = open[i];
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      const auto d = rule.record(id, std::vector{value(id)});
      open.insert(open.end(), d.released.begin(), d.released.end());
    }
    for (int p = 0; p < points; ++p) EXPECT_EQ(rule.needed_count(static_cast<std::size_t>(p)), reference[p]) << trial;
  }
}

TEST(ReplicateRule, ReplayedResultsCascadeLikeTheRunThatMadeThem) {
  const Plan plan = adaptive_plan(1, 2, 8, 2);
  const std::vector<double> v = {0.5, 3.5, 2.0, 2.0, 2.0, 2.0};  // se 1.5, 0.61, then 0.39 <= 0.5
  ReplicateRule rule(plan);
  ReplicateRule::Decisions all;
  for (std::uint64_t id = 5; id + 1 > 0; --id) {  // a resume feeds what the store holds, any order
    const auto d = rule.record(id, std::vector{v[id]});
    all.released.insert(all.released.end(), d.released.begin(), d.released.end());
    all.not_needed.insert(all.not_needed.end(), d.not_needed.begin(), d.not_needed.end());
  }
  EXPECT_EQ(all.released, ids(2, 6));
  EXPECT_EQ(all.not_needed, ids(6, 8));
}

TEST(Adaptive, TargetValuesAndCostRange) {
  const Plan plan = adaptive_plan(3, 2, 6, 2);
  std::vector<metrics::LayerRow> layers(3);
  for (std::size_t l = 0; l < 3; ++l) layers[l].fill(static_cast<double>(l) + 0.5);
  const auto s1 = metrics::metric_index("s1");
  layers[1][s1] = 7.0;
  EXPECT_EQ(target_values(plan.spec.adaptive, plan.max_depth, layers), std::vector<double>{7.0});
  config::AdaptiveReplicates last = plan.spec.adaptive;
  last.targets[0].layer = -1;
  EXPECT_EQ(target_values(last, plan.max_depth, layers), std::vector<double>{2.5});
  layers.resize(1);  // diverged before layer 1
  EXPECT_TRUE(std::isnan(target_values(plan.spec.adaptive, plan.max_depth, layers)[0]));

  const auto all = ids(0, plan.tasks.size());
  const CostRange c = cost_range(plan, all);
  EXPECT_EQ(c.max_tasks, 18u);
  EXPECT_EQ(c.min_tasks, 6u);
  EXPECT_DOUBLE_EQ(c.max_flops, plan.total_flops());
  EXPECT_DOUBLE_EQ(c.min_flops * 3.0, c.max_flops);  // equal-cost tasks: min/max of replicates
}

TEST(Adaptive, ShardsHoldWholePoints) {
  const Plan whole = adaptive_plan(5, 2, 4, 2);
  std::vector<int> owner(whole.tasks.size(), -1);
  for (int i = 0; i < 3; ++i) {
    const Plan shard = make_plan(whole.spec, Shard{i, 3});
    for (const auto& b : shard.bundles)
      for (const auto id : b.tasks) {
        EXPECT_EQ(owner[id], -1);
        owner[id] = i;
        EXPECT_EQ(static_cast<int>(whole.tasks[id].point % 3), i);
      }
  }
  EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0);
}

}  // namespace
}  // namespace rcsweep::plan
