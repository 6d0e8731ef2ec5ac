// sweep/decisions: what written results decide for adaptive replicates (released replicates; those
// not needed recorded only when pending at the start), and which stored results a resume replays
// the decisions from.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/metrics.hpp"
#include "plan/adaptive.hpp"
#include "store/store.hpp"
#include "sweep/decisions.hpp"
#include "../store/store_test_support.hpp"
#include "sweep_test_plans.hpp"

using namespace rcsweep;
using store::TaskStatus;
using sweep::TaskList;

namespace {

/// A finished result whose target (s1 at layer 1) is `s1`.
store::TaskResult result(const plan::Plan& plan, std::uint64_t id, double s1, TaskStatus status = TaskStatus::done) {
  store::TaskResult r;
  r.task = id;
  r.status = status;
  r.rank = 0;
  if (status == TaskStatus::failed) return r;
  constexpr auto s1_index = metrics::metric_index("s1");
  for (int l = 0; l <= plan.max_depth; ++l) {
    metrics::LayerRow row{};
    row[s1_index] = l == 1 ? s1 : 0.0;
    r.layers.push_back(row);
    r.spectra.push_back(plan.spectrum_at(l) ? std::vector<double>(plan.spectrum_length(id), 0.5)
                                            : std::vector<double>{});
  }
  return r;
}

TaskList tasks_of(const std::vector<store::TaskResult>& results) {
  TaskList out;
  for (const auto& r : results) out.push_back(r.task);
  return out;
}

TEST(NotNeededResult, StatusOnly) {
  const auto r = sweep::not_needed_result(7);
  EXPECT_EQ(r.task, 7u);
  EXPECT_EQ(r.status, TaskStatus::not_needed);
  EXPECT_EQ(r.rank, -1);
  EXPECT_TRUE(std::isnan(r.wall_s));
  EXPECT_TRUE(r.layers.empty());
}

TEST(Decide, SpreadReleasesTheNextStep) {
  const auto plan = test::adaptive_plan(2, 2, 6, 2);  // ids: point * 6 + replicate
  plan::ReplicateRule rule(plan);
  const std::vector<TaskStatus> start(plan.tasks.size(), TaskStatus::pending);
  auto d = sweep::decide(rule, plan, start, {result(plan, 0, 0.0), result(plan, 6, 1.0)});
  EXPECT_TRUE(d.released.empty() && d.not_needed.empty());
  d = sweep::decide(rule, plan, start, {result(plan, 1, 4.0), result(plan, 7, 1.1)});  // point 0: se 2
  EXPECT_EQ(d.released, test::ids(2, 4));
  EXPECT_EQ(tasks_of(d.not_needed), test::ids(8, 12));  // point 1: se 0.05
  for (const auto& r : d.not_needed) EXPECT_EQ(r.status, TaskStatus::not_needed);
}

TEST(Decide, ResultsCopiedFromAnotherStoreStay) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  plan::ReplicateRule rule(plan);
  std::vector<TaskStatus> start(plan.tasks.size(), TaskStatus::pending);
  start[3] = TaskStatus::done;  // e.g. copied by --reuse
  start[4] = TaskStatus::not_needed;
  sweep::decide(rule, plan, start, {result(plan, 0, 1.0)});
  const auto d = sweep::decide(rule, plan, start, {result(plan, 1, 1.0)});
  EXPECT_EQ(tasks_of(d.not_needed), (TaskList{2, 5}));
}

TEST(Decide, AFailedResultHoldsItsPoint) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  plan::ReplicateRule rule(plan);
  const std::vector<TaskStatus> start(plan.tasks.size(), TaskStatus::pending);
  const auto d = sweep::decide(rule, plan, start, {result(plan, 0, 1.0), result(plan, 1, 0.0, TaskStatus::failed)});
  EXPECT_TRUE(d.released.empty() && d.not_needed.empty());
  EXPECT_EQ(sweep::decide(rule, plan, start, {result(plan, 1, 1.0)}).not_needed.size(), 4u);  // run again
}

TEST(Decide, DivergedResultsCountWithTheirValues) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  plan::ReplicateRule rule(plan);
  const std::vector<TaskStatus> start(plan.tasks.size(), TaskStatus::pending);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // One finite value: no standard error, the next step runs.
  const auto d = sweep::decide(rule, plan, start, {result(plan, 0, 1.0), result(plan, 1, nan, TaskStatus::diverged)});
  EXPECT_EQ(d.released, test::ids(2, 4));
}

TEST(ReplayedTasks, DoneAndUnlessRetriedThoseThatEndedEarly) {
  const auto plan = test::adaptive_plan(2, 2, 4, 2);  // 8 tasks
  std::vector<TaskStatus> status(plan.tasks.size(), TaskStatus::pending);
  status[5] = TaskStatus::done;
  status[0] = TaskStatus::done;
  status[1] = TaskStatus::failed;
  status[4] = TaskStatus::diverged;
  status[6] = TaskStatus::vanished;
  status[7] = TaskStatus::not_needed;
  EXPECT_EQ(sweep::replayed_tasks(plan, status, false), (TaskList{0, 1, 4, 5, 6}));
  EXPECT_EQ(sweep::replayed_tasks(plan, status, true), (TaskList{0, 5}));
}

using ReplayDecisions = test::StoreDirTest;

// A run stopped between its decisions and their write: the resume takes them again from the
// stored results, records the replicates not needed and needs the released ones.
TEST_F(ReplayDecisions, TakesTheStoredResultsDecisionsAgain) {
  const auto plan = test::adaptive_plan(2, 2, 6, 2);  // ids: point * 6 + replicate
  {
    store::Store s = store::Store::create(path("r.h5"), plan, test::test_provenance(1), false);
    const std::vector<store::TaskResult> batch{result(plan, 0, 1.0), result(plan, 1, 1.0), result(plan, 6, 0.0),
                                               result(plan, 7, 4.0)};
    s.write(batch);
  }
  store::Store s = store::Store::open_resume(path("r.h5"), plan, test::test_provenance(1));
  const auto status = s.task_status();
  const plan::ReplicateRule rule = sweep::replay_decisions(plan, s, status, false);
  for (const auto id : test::ids(2, 6)) EXPECT_TRUE(rule.not_needed(id)) << id;
  EXPECT_TRUE(rule.needed(8) && rule.needed(9) && !rule.needed(10));
  const auto after = s.task_status();
  for (const auto id : test::ids(2, 6)) EXPECT_EQ(after[id], TaskStatus::not_needed) << id;
  for (const auto id : test::ids(8, 12)) EXPECT_EQ(after[id], TaskStatus::pending) << id;
  EXPECT_EQ(after[0], TaskStatus::done);
}

// With --retry-failed a task that ended early is not replayed: its point waits for it.
TEST_F(ReplayDecisions, TasksRunAgainAreNotReplayed) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  {
    store::Store s = store::Store::create(path("f.h5"), plan, test::test_provenance(1), false);
    auto diverged = result(plan, 1, std::numeric_limits<double>::quiet_NaN(), TaskStatus::diverged);
    diverged.layers.resize(2);
    diverged.spectra.resize(2);
    diverged.message = "diverged at layer 1: non-finite X";
    const std::vector<store::TaskResult> batch{result(plan, 0, 1.0), diverged};
    s.write(batch);
  }
  store::Store s = store::Store::open_resume(path("f.h5"), plan, test::test_provenance(1));
  const auto status = s.task_status();
  // Replayed: one finite value, no standard error: the next step is needed.
  EXPECT_TRUE(sweep::replay_decisions(plan, s, status, false).needed(2));
  // Run again: replicate 1 is unknown, nothing is decided yet.
  EXPECT_FALSE(sweep::replay_decisions(plan, s, status, true).needed(2));
  EXPECT_EQ(s.task_status()[2], TaskStatus::pending);
}

}  // namespace
