// The units rank 0 hands out (plan/schedule.hpp): whole bundles when there are many, slices of a
// bundle when there are few, every task exactly once, and the cost model's split of a bundle into
// each task's own work and the work a unit shares.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/sweep_spec.hpp"
#include "plan/cost_model.hpp"
#include "plan/schedule.hpp"

namespace rcsweep {
namespace {

/// `n` bundles of `tasks` tasks of `task_s` seconds each, sharing `shared_s`; ids consecutive.
std::vector<plan::BundleWork> bundles(std::size_t n, std::size_t tasks, double task_s, double shared_s) {
  std::vector<plan::BundleWork> out(n);
  std::uint64_t id = 0;
  for (auto& b : out) {
    for (std::size_t i = 0; i < tasks; ++i) b.tasks.push_back(id++);
    b.task_s.assign(tasks, task_s);
    b.shared_s = shared_s;
  }
  return out;
}

/// Every task exactly once, no empty unit, a unit's tasks from one bundle in bundle order, units
/// largest first, and the totals consistent.
void expect_valid(const plan::Schedule& s, const std::vector<plan::BundleWork>& in) {
  std::map<std::uint64_t, std::pair<std::size_t, std::size_t>> where;  // id -> (bundle, position)
  std::size_t n = 0;
  for (std::size_t b = 0; b < in.size(); ++b)
    for (std::size_t i = 0; i < in[b].tasks.size(); ++i, ++n) where[in[b].tasks[i]] = {b, i};
  std::multiset<std::uint64_t> seen;
  double work = 0.0;
  for (std::size_t u = 0; u < s.units.size(); ++u) {
    const auto& unit = s.units[u];
    ASSERT_FALSE(unit.tasks.empty()) << "unit " << u;
    if (u > 0) {
      EXPECT_GE(s.units[u - 1].seconds, unit.seconds) << "not largest first at unit " << u;
    }
    for (std::size_t i = 0; i < unit.tasks.size(); ++i) {
      const auto [b, pos] = where.at(unit.tasks[i]);
      EXPECT_EQ(b, unit.bundle) << "task " << unit.tasks[i] << " of another bundle";
      if (i > 0) {
        EXPECT_EQ(pos, where.at(unit.tasks[i - 1]).second + 1) << "not a contiguous slice";
      }
      seen.insert(unit.tasks[i]);
    }
    work += unit.seconds;
  }
  EXPECT_EQ(seen.size(), n);
  for (const auto& [id, w] : where) EXPECT_EQ(seen.count(id), 1u) << "task " << id;
  EXPECT_NEAR(work, s.work_s, 1e-9 * work);
  EXPECT_EQ(s.tasks, n);
  EXPECT_GT(s.makespan_s, 0.0);
  EXPECT_LE(s.utilisation(), 1.0 + 1e-12);
}

TEST(Schedule, HandOutMakespanIsLargestFirstListScheduling) {
  EXPECT_DOUBLE_EQ(plan::hand_out_makespan({3, 2, 2, 1}, 2), 4.0);  // 3+1, 2+2
  EXPECT_DOUBLE_EQ(plan::hand_out_makespan({1, 1, 1}, 4), 1.0);
  EXPECT_DOUBLE_EQ(plan::hand_out_makespan({1, 1, 1}, 1), 3.0);
  EXPECT_DOUBLE_EQ(plan::hand_out_makespan({}, 3), 0.0);
}

// One bundle of 201 tasks (a scan of lambda) on 2 ranks: two slices of 100 and 101 tasks; the
// shared work is repeated once, and the makespan is about half.
TEST(Schedule, OneBundleOnTwoRanksIsCutInTwo) {
  const auto in = bundles(1, 201, 1.0, 5.0);
  const auto s = plan::make_schedule(in, 2);
  expect_valid(s, in);
  ASSERT_EQ(s.units.size(), 2u);
  EXPECT_EQ(s.split_bundles, 1u);
  EXPECT_EQ(s.units[0].tasks.size() + s.units[1].tasks.size(), 201u);
  EXPECT_EQ(std::max(s.units[0].tasks.size(), s.units[1].tasks.size()), 101u);
  EXPECT_DOUBLE_EQ(s.bundle_work_s, 206.0);
  EXPECT_DOUBLE_EQ(s.work_s, 211.0);
  EXPECT_DOUBLE_EQ(s.makespan_s, 106.0);
  EXPECT_GT(s.utilisation(), 0.99);
  EXPECT_EQ(plan::describe(s),
            "expected utilisation 100% (units: 2 slices of 1 bundle; the slices repeat shared work: +2%)");
  EXPECT_EQ(plan::idle_warning(s, in), "");
}

// Where the shared work is cheap, every rank gets several units (4), so that a rank slowed by
// what the model does not see leaves some of its share to the others; the slices repeat at most 2 %.
TEST(Schedule, CheapSharedWorkGivesEveryRankSeveralUnits) {
  const auto in = bundles(1, 200, 1.0, 0.1);
  const auto s = plan::make_schedule(in, 2);
  expect_valid(s, in);
  EXPECT_EQ(s.units.size(), 8u);
  EXPECT_LE(s.work_s, 1.02 * s.bundle_work_s);
  EXPECT_LE(s.makespan_s, 1.01 * (100.0 + 0.1));
}

// Few bundles, many ranks: every bundle is cut, and every rank gets work.
TEST(Schedule, FewBundlesOnManyRanksAreCutIntoSlices) {
  const auto in = bundles(4, 256, 1.0, 0.5);
  const auto s = plan::make_schedule(in, 64);
  expect_valid(s, in);
  EXPECT_EQ(s.split_bundles, 4u);
  EXPECT_GE(s.units.size(), 64u);
  EXPECT_LE(s.makespan_s, 1.05 * s.bundle_work_s / 64);
  EXPECT_GT(s.utilisation(), 0.95);
}

// Many bundles (25 per rank): whole bundles, nothing repeated.
TEST(Schedule, ManyBundlesStayWhole) {
  const auto in = bundles(200, 8, 1.0, 2.0);
  for (const int ranks : {1, 2, 8}) {
    const auto s = plan::make_schedule(in, ranks);
    expect_valid(s, in);
    EXPECT_EQ(s.units.size(), 200u) << ranks << " ranks";
    EXPECT_EQ(s.split_bundles, 0u);
    EXPECT_DOUBLE_EQ(s.work_s, s.bundle_work_s);
    EXPECT_EQ(plan::describe(s).find("slice"), std::string::npos);
  }
  EXPECT_EQ(plan::describe(plan::make_schedule(in, 2)), "expected utilisation 100% (units: 200 bundles)");
}

// The tail would idle with whole bundles: 3 equal bundles on 2 ranks end after 2 bundle times,
// 200 on 16 ranks after 13 (12.5 of work per rank); cutting some of them shortens the tail.
TEST(Schedule, TheTailIsCutWhenRanksWouldIdle) {
  const auto three = bundles(3, 10, 1.0, 0.1);
  const auto s = plan::make_schedule(three, 2);
  expect_valid(s, three);
  EXPECT_GE(s.split_bundles, 1u);
  EXPECT_LT(s.makespan_s, 0.8 * 2 * three[0].seconds());
  const auto many = bundles(200, 8, 1.0, 2.0);
  const auto m = plan::make_schedule(many, 16);
  expect_valid(m, many);
  EXPECT_GE(m.split_bundles, 1u);
  EXPECT_LT(m.makespan_s, 13 * many[0].seconds());
  EXPECT_LE(m.makespan_s, 1.01 * m.work_s / 16);
}

// Slices of about equal time, not of equal task counts.
TEST(Schedule, SlicesAreCutByTime) {
  std::vector<plan::BundleWork> uneven(1);
  for (std::uint64_t i = 0; i < 12; ++i) {
    uneven[0].tasks.push_back(i);
    uneven[0].task_s.push_back(i < 4 ? 4.0 : 0.5);  // 16 s in the first 4 tasks, 4 s in the other 8
  }
  uneven[0].shared_s = 1.0;
  const auto u = plan::make_schedule(uneven, 2);
  expect_valid(u, uneven);
  // 1 + 4 + 4 | 1 + 4 + 4 x 0.5 + 4: 9 and 13 s; cut by task count, the first 6 tasks would take 18 s
  EXPECT_DOUBLE_EQ(u.makespan_s, 13.0);
}

// Shared work as large as the tasks': cutting would not pay, the bundle stays whole.
TEST(Schedule, ExpensiveSharedWorkKeepsBundlesWhole) {
  const auto in = bundles(1, 4, 1.0, 1000.0);
  const auto s = plan::make_schedule(in, 4);
  expect_valid(s, in);
  EXPECT_EQ(s.units.size(), 1u);
}

// Fewer tasks than ranks: single-task units, and a warning that says how many ranks to use.
TEST(Schedule, FewerTasksThanRanksWarns) {
  const auto in = bundles(1, 3, 1.0, 0.01);
  const auto s = plan::make_schedule(in, 4);
  expect_valid(s, in);
  EXPECT_EQ(s.units.size(), 3u);
  for (const auto& u : s.units) EXPECT_EQ(u.tasks.size(), 1u);
  const auto w = plan::idle_warning(s, in);
  EXPECT_NE(w.find("only 3 tasks for 4 ranks"), std::string::npos) << w;
  EXPECT_NE(w.find("-n 3"), std::string::npos) << w;
}

// One long task among short ones: the ranks idle while it finishes, and fewer ranks finish as soon.
TEST(Schedule, LowUtilisationWarnsAndSuggestsFewerRanks) {
  std::vector<plan::BundleWork> in = bundles(6, 1, 1.0, 0.0);
  in[0].task_s[0] = 10.0;
  const auto s = plan::make_schedule(in, 6);
  expect_valid(s, in);
  EXPECT_LT(s.utilisation(), 0.8);
  const auto w = plan::idle_warning(s, in);
  EXPECT_NE(w.find("ranks will idle"), std::string::npos) << w;
  EXPECT_NE(w.find("-n 2 keeps"), std::string::npos) << w;  // 10 s on one rank, 5 s on the other
  EXPECT_EQ(plan::fewest_ranks(in, 6, 0.02), 2);
}

TEST(Schedule, EmptyAndSingleRank) {
  const auto none = plan::make_schedule({}, 4);
  EXPECT_TRUE(none.units.empty());
  EXPECT_EQ(plan::idle_warning(none, {}), "");
  EXPECT_EQ(plan::describe(none), "nothing to run");
  const auto in = bundles(2, 50, 1.0, 1.0);
  const auto one = plan::make_schedule(in, 1);
  expect_valid(one, in);
  EXPECT_EQ(one.units.size(), 2u);
}

plan::Plan lambda_scan(int n, const std::string& extra = "") {
  std::string lambdas;
  for (int i = 0; i < n; ++i) lambdas += (i ? ", " : "") + std::to_string(0.1 * i);
  return plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "scan"
seed = 1
replicates = 1
[model]
depth = 8
T = 64
d = 64
mixer = "softmax"
)" + extra + "[axes]\nlambda = [" + lambdas + "]\n",
                                             "test"));
}

// The cost model prices what a unit shares once: a bundle's estimate is its tasks' own work plus
// the shared work, and a slice's is its tasks' plus the same shared work.
TEST(Schedule, CostModelSplitsABundleIntoTaskAndSharedWork) {
  const auto c = plan::default_calibration();
  const auto plan = lambda_scan(8);
  ASSERT_EQ(plan.bundles.size(), 1u);
  const auto whole = plan::bundle_work(plan, plan.bundles[0].tasks, c);
  ASSERT_EQ(whole.task_s.size(), 8u);
  EXPECT_GT(whole.shared_s, 0.0);
  for (const double t : whole.task_s) EXPECT_DOUBLE_EQ(t, whole.task_s[0]);  // lambda changes no cost
  EXPECT_DOUBLE_EQ(whole.seconds(), plan::bundle_seconds(plan, plan.bundles[0], c));
  const std::vector<std::uint64_t> half(plan.bundles[0].tasks.begin(), plan.bundles[0].tasks.begin() + 4);
  const auto slice = plan::bundle_work(plan, half, c);
  EXPECT_DOUBLE_EQ(slice.shared_s, whole.shared_s);
  EXPECT_DOUBLE_EQ(slice.task_s[0], whole.task_s[0]);
  // Two slices cost more than the bundle by the shared work, less than two bundles.
  EXPECT_GT(2 * slice.seconds(), whole.seconds());
  EXPECT_LT(2 * slice.seconds(), 2 * whole.seconds());
  // A scaled input is not shared: its layer 0 and 1 are its own.
  const auto scaled = lambda_scan(2, "input_scale = 2.0\n");
  const auto own = plan::bundle_work(scaled, scaled.bundles[0].tasks, c);
  const auto shared = plan::bundle_work(lambda_scan(2), lambda_scan(2).bundles[0].tasks, c);
  EXPECT_GT(own.task_s[0], shared.task_s[0]);
  EXPECT_LT(own.shared_s, shared.shared_s);
}

}  // namespace
}  // namespace rcsweep
