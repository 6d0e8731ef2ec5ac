// sweep/units: which tasks a run computes (pending, or ended early with --retry-failed; with
// adaptive replicates only those needed so far), the units they are cut into and what they add up
// to, and the units of released replicates (one per bundle).
#include <algorithm>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "plan/adaptive.hpp"
#include "plan/cost_model.hpp"
#include "store/store.hpp"
#include "sweep/units.hpp"
#include "sweep_test_plans.hpp"

using namespace rcsweep;
using store::TaskStatus;
using sweep::TaskList;

namespace {

/// Every task id in `units`, ascending.
TaskList all_tasks(const std::deque<sweep::WorkItem>& units) {
  TaskList out;
  for (const auto& u : units) out.insert(out.end(), u.tasks.begin(), u.tasks.end());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Runnable, PendingAndWithRetryFailedThoseThatEndedEarly) {
  const std::vector<TaskStatus> status{TaskStatus::pending,  TaskStatus::done,     TaskStatus::failed,
                                       TaskStatus::diverged, TaskStatus::vanished, TaskStatus::not_needed};
  const sweep::Runnable plain{status, false}, retry{status, true};
  const std::vector<bool> want_plain{true, false, false, false, false, false};
  const std::vector<bool> want_retry{true, false, true, true, true, false};
  for (std::uint64_t id = 0; id < status.size(); ++id) {
    EXPECT_EQ(plain(id), want_plain[id]) << id;
    EXPECT_EQ(retry(id), want_retry[id]) << id;
    EXPECT_EQ(sweep::ended_early(status[id]), id >= 2 && id <= 4) << id;
  }
}

TEST(UnitPricer, AssumedRateWithoutCalibrationElseTheCalibratedTime) {
  const auto plan = test::fixed_plan(2, 2);
  const std::optional<plan::Calibration> none;
  const sweep::UnitPricer rough{plan, none, 1e9};
  const auto w = rough.item({0, 2}, 123.0);
  EXPECT_EQ(w.tasks, (TaskList{0, 2}));
  EXPECT_EQ(w.flops, plan.tasks[0].flops + plan.tasks[2].flops);
  EXPECT_DOUBLE_EQ(w.seconds, w.flops / 1e9);
  const std::optional<plan::Calibration> measured = plan::default_calibration();
  const sweep::UnitPricer calibrated{plan, measured, 1e9};
  EXPECT_EQ(calibrated.item({0, 2}, 123.0).seconds, 123.0);
}

TEST(PendingWork, EveryRunnableTaskOnceAndTheFinishedSkipped) {
  const auto plan = test::fixed_plan(3, 4);  // 12 tasks
  std::vector<TaskStatus> status(plan.tasks.size(), TaskStatus::pending);
  status[1] = TaskStatus::done;
  status[5] = TaskStatus::failed;
  status[7] = TaskStatus::diverged;
  const std::optional<plan::Calibration> none;
  const sweep::UnitPricer pricer{plan, none, 1e9};
  for (const bool retry : {false, true}) {
    const auto w = sweep::pending_work(plan, sweep::Runnable{status, retry}, nullptr, pricer, 2);
    TaskList want;
    for (std::uint64_t id = 0; id < 12; ++id)
      if (id != 1 && (retry || (id != 5 && id != 7))) want.push_back(id);
    EXPECT_EQ(all_tasks(w.units), want);
    EXPECT_EQ(w.tasks, want.size());
    EXPECT_EQ(w.in_shard, 12u);
    EXPECT_EQ(w.skipped(), 12u - want.size());
    EXPECT_EQ(w.possible_tasks, 0u);
    EXPECT_EQ(w.units.size(), w.schedule.units.size());
    double flops = 0.0;
    for (const auto id : want) flops += plan.tasks[id].flops;
    EXPECT_DOUBLE_EQ(w.flops, flops);
    EXPECT_EQ(w.bundles.size(), 4u);  // one per replicate: each still has tasks to run
  }
}

TEST(PendingWork, NothingPendingNoUnits) {
  const auto plan = test::fixed_plan(2, 2);
  const std::vector<TaskStatus> status(plan.tasks.size(), TaskStatus::done);
  const std::optional<plan::Calibration> none;
  const auto w = sweep::pending_work(plan, sweep::Runnable{status, false}, nullptr, {plan, none, 1e9}, 3);
  EXPECT_TRUE(w.units.empty() && w.bundles.empty());
  EXPECT_EQ(w.skipped(), 4u);
}

TEST(PendingWork, AdaptiveRunsTheNeededReplicatesAndCountsThePossibleOnes) {
  const auto plan = test::adaptive_plan(2, 2, 6, 2);  // ids: point * 6 + replicate
  const std::vector<TaskStatus> status(plan.tasks.size(), TaskStatus::pending);
  plan::ReplicateRule rule(plan);
  const std::optional<plan::Calibration> none;
  const auto w = sweep::pending_work(plan, sweep::Runnable{status, false}, &rule, {plan, none, 1e9}, 2);
  EXPECT_EQ(all_tasks(w.units), (TaskList{0, 1, 6, 7}));
  EXPECT_EQ(w.possible_tasks, 8u);
  double possible = 0.0;
  for (const auto id : {2, 3, 4, 5, 8, 9, 10, 11}) possible += plan.tasks[static_cast<std::size_t>(id)].flops;
  EXPECT_DOUBLE_EQ(w.possible_flops, possible);
  EXPECT_EQ(w.skipped(), 0u);
  // Replicates 2..5 of point 0 decided not needed: neither run nor possible, but skipped.
  rule.record(0, std::vector{1.0});
  ASSERT_EQ(rule.record(1, std::vector{1.0}).not_needed, test::ids(2, 6));
  std::vector<TaskStatus> after = status;
  after[0] = after[1] = TaskStatus::done;
  const auto w2 = sweep::pending_work(plan, sweep::Runnable{after, false}, &rule, {plan, none, 1e9}, 2);
  EXPECT_EQ(all_tasks(w2.units), (TaskList{6, 7}));
  EXPECT_EQ(w2.possible_tasks, 4u);
  EXPECT_EQ(w2.skipped(), 6u);
}

TEST(ReleasedUnits, OneSortedUnitPerBundleOfRunnableTasks) {
  const auto plan = test::fixed_plan(3, 2);  // bundles: one per replicate, ids point * 2 + replicate
  std::vector<TaskStatus> status(plan.tasks.size(), TaskStatus::pending);
  status[4] = TaskStatus::done;  // point 2, replicate 0: not runnable
  const std::optional<plan::Calibration> none;
  const sweep::ReleasedUnits units(plan, sweep::Runnable{status, false}, {plan, none, 1e9});
  auto items = units({5, 2, 4, 0, 3});
  ASSERT_EQ(items.size(), 2u);
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.tasks < b.tasks; });
  EXPECT_EQ(items[0].tasks, (TaskList{0, 2}));  // replicate 0 (task 4 left out)
  EXPECT_EQ(items[1].tasks, (TaskList{3, 5}));  // replicate 1
  EXPECT_DOUBLE_EQ(items[1].flops, plan.tasks[3].flops + plan.tasks[5].flops);
  EXPECT_DOUBLE_EQ(items[1].seconds, items[1].flops / 1e9);
  EXPECT_TRUE(units({4}).empty());
}

}  // namespace
