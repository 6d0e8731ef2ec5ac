// sweep/work_queue: units handed out in order, within a deadline (scaled by measured times), and,
// with adaptive replicates, "wait" while results handed out may still add work.
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sweep/work_queue.hpp"
#include "sweep_test_plans.hpp"

using namespace rcsweep;
using sweep::TaskList;
using sweep::WorkItem;
using sweep::WorkQueue;
using steady = std::chrono::steady_clock;

namespace {

WorkItem item(TaskList tasks, double seconds, const plan::Plan& plan) {
  WorkItem w;
  w.tasks = std::move(tasks);
  for (const auto id : w.tasks) w.flops += plan.tasks[id].flops;
  w.seconds = seconds;
  return w;
}

steady::time_point in(double seconds) {
  return steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
}

TEST(WorkQueue, HandsOutUnitsInOrderThenNothing) {
  const auto plan = test::fixed_plan(2, 3);
  WorkQueue q(plan, {item({0, 3}, 30.0, plan), item({1}, 20.0, plan), item({2, 5}, 10.0, plan)}, std::nullopt, false);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.pop(), (TaskList{0, 3}));
  bool wait = true;
  EXPECT_EQ(q.try_pop(wait), (TaskList{1}));
  EXPECT_FALSE(wait);
  EXPECT_EQ(q.pop(), (TaskList{2, 5}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), std::nullopt);  // not growing: an empty queue is the end, even with tasks out
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_FALSE(wait);
  EXPECT_FALSE(q.time_limited());
}

TEST(WorkQueue, StopEndsTheHandOut) {
  const auto plan = test::fixed_plan(2, 3);
  WorkQueue q(plan, {item({0}, 1.0, plan), item({1}, 1.0, plan)}, std::nullopt, true);
  q.stop();
  bool wait = true;
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_FALSE(wait);
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_FALSE(q.time_limited());
}

TEST(WorkQueue, PushInsertsLargestFirst) {
  const auto plan = test::fixed_plan(2, 3);
  WorkQueue q(plan, {item({0}, 30.0, plan), item({1}, 10.0, plan)}, std::nullopt, false);
  q.push({item({2}, 20.0, plan), item({3}, 40.0, plan), item({4}, 5.0, plan)});
  std::vector<TaskList> order;
  while (auto t = q.pop()) order.push_back(*t);
  EXPECT_EQ(order, (std::vector<TaskList>{{3}, {0}, {2}, {1}, {4}}));
}

TEST(WorkQueue, GrowingQueueWaitsWhileResultsHandedOutAreNotWritten) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  WorkQueue q(plan, {item({0, 1}, 1.0, plan)}, std::nullopt, true);
  EXPECT_EQ(q.pop(), (TaskList{0, 1}));
  bool wait = false;
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_TRUE(wait);  // tasks 0 and 1 may release replicates
  q.written(1);
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_TRUE(wait);  // task 1 still may
  q.push({item({2, 3}, 1.0, plan)});
  EXPECT_EQ(q.try_pop(wait), (TaskList{2, 3}));
  EXPECT_FALSE(wait);
  q.written(3);  // 1, 2 and 3 written: nothing can add work
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_FALSE(wait);
}

TEST(WorkQueue, PopWaitsForReleasedWork) {
  const auto plan = test::adaptive_plan(1, 2, 6, 2);
  WorkQueue q(plan, {item({0, 1}, 1.0, plan)}, std::nullopt, true);
  ASSERT_EQ(q.pop(), (TaskList{0, 1}));
  std::optional<TaskList> got;
  std::thread compute([&] { got = q.pop(); });  // blocks: tasks 0 and 1 are out
  q.push({item({2, 3}, 1.0, plan)});
  compute.join();
  EXPECT_EQ(got, (TaskList{2, 3}));
  std::thread last([&] { got = q.pop(); });
  q.written(4);  // all written: pop ends
  last.join();
  EXPECT_EQ(got, std::nullopt);
}

TEST(WorkQueue, OnlyUnitsThatFitBeforeTheDeadline) {
  const auto plan = test::fixed_plan(2, 3);
  WorkQueue q(plan, {item({0}, 1e9, plan), item({1}, 10.0, plan), item({2}, 1e8, plan)}, in(3600.0), false);
  EXPECT_EQ(q.pop(), (TaskList{1}));  // the largest that fits, the others skipped
  EXPECT_FALSE(q.time_limited());
  EXPECT_EQ(q.pop(), std::nullopt);  // none fits: the time limit stops the hand-out
  EXPECT_TRUE(q.time_limited());
  EXPECT_FALSE(q.empty());  // the units left stay (their tasks pending)
  bool wait = true;
  EXPECT_EQ(q.try_pop(wait), std::nullopt);
  EXPECT_FALSE(wait);
}

TEST(WorkQueue, PastDeadlineHandsOutNothing) {
  const auto plan = test::fixed_plan(1, 2);
  WorkQueue q(plan, {item({0}, 0.0, plan)}, in(-1.0), false);
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_TRUE(q.time_limited());
}

TEST(WorkQueue, EstimatesScaleByMeasuredTimesOnceASecondIsDone) {
  const auto plan = test::fixed_plan(2, 3);
  // Unit {0, 3} was estimated at 1 s; unit {1} at 400 s fits a 3600 s deadline as estimated.
  WorkQueue q(plan, {item({0, 3}, 1.0, plan), item({1}, 400.0, plan), item({2}, 400.0, plan)}, in(3600.0), false);
  ASSERT_EQ(q.pop(), (TaskList{0, 3}));
  q.calibrate(0, 0.5);  // half a second measured: too little to scale
  ASSERT_EQ(q.pop(), (TaskList{1}));
  q.calibrate(3, 9.5);  // 10 s measured for 1 s estimated: 400 s -> 4000 s, past the deadline
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_TRUE(q.time_limited());
}

}  // namespace
