// Cost-weighted progress (sweep/progress.hpp): the fraction counts flops, not tasks; the events
// come at most every interval, and always the last.
#include "sweep/progress.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace rcsweep::sweep {
namespace {

struct Collected {
  std::vector<event::Progress> events;
  EventSink sink() {
    return [this](const Event& e) { events.push_back(std::get<event::Progress>(e)); };
  }
};

TEST(Progress, FractionIsTheShareOfFlopsDone) {
  Progress p(100.0, 4, {}, 10.0);
  p.add(10.0);
  p.add(30.0);
  const auto now = p.now();
  EXPECT_EQ(now.tasks_done, 2u);
  EXPECT_EQ(now.tasks_total, 4u);
  EXPECT_DOUBLE_EQ(now.fraction, 0.4);
  EXPECT_FALSE(now.last);
}

TEST(Progress, TheBundleInHandCountsUntilItsTasksFinish) {
  Progress p(100.0, 2, {}, 10.0);
  p.set_partial(25.0);
  EXPECT_DOUBLE_EQ(p.now().fraction, 0.25);
  EXPECT_EQ(p.now().tasks_done, 0u);
  p.set_partial(0.0);
  p.add(50.0);
  EXPECT_DOUBLE_EQ(p.now().fraction, 0.5);
}

TEST(Progress, DroppedTasksLeaveTheTotalAndTheEtaIsABoundUntilTheEnd) {
  Progress p(100.0, 4, {}, 10.0);
  p.total_is_bound();
  p.add(25.0);
  EXPECT_TRUE(p.now().eta_is_bound);
  p.drop(50.0);
  p.drop(25.0);
  EXPECT_EQ(p.now().tasks_total, 2u);
  EXPECT_DOUBLE_EQ(p.now().fraction, 1.0);
  p.add(0.0);
  EXPECT_FALSE(p.now().eta_is_bound);  // every task of the total is done
}

TEST(Progress, NothingDoneHasAnUnknownEta) {
  Progress p(100.0, 1, {}, 10.0);
  EXPECT_LT(p.now().eta_s, 0.0);
  p.add(100.0);
  EXPECT_DOUBLE_EQ(p.now().fraction, 1.0);
  EXPECT_DOUBLE_EQ(p.now().eta_s, 0.0);
}

TEST(Progress, ReportsAtMostEveryIntervalButAlwaysTheLast) {
  Collected c;
  Progress p(100.0, 2, c.sink(), 3600.0);
  p.report();
  p.add(50.0);
  p.report();
  EXPECT_TRUE(c.events.empty());
  p.report(true);
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_TRUE(c.events[0].last);
  EXPECT_DOUBLE_EQ(c.events[0].fraction, 0.5);
}

TEST(Progress, ReportsEveryTimeWithoutAnInterval) {
  Collected c;
  Progress p(100.0, 2, c.sink(), 0.0);
  p.report();
  p.add(50.0);
  p.report();
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_DOUBLE_EQ(c.events[0].fraction, 0.0);
  EXPECT_DOUBLE_EQ(c.events[1].fraction, 0.5);
  EXPECT_EQ(c.events[1].tasks_done, 1u);
}

TEST(Progress, WithoutASinkNothingIsSent) {
  Progress p(100.0, 2, {}, 0.0);
  EXPECT_NO_THROW(p.report(true));  // an empty std::function would throw bad_function_call
}

}  // namespace
}  // namespace rcsweep::sweep
