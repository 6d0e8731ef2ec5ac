// plan/threads: how a unit's tasks share a rank's threads (mode, order, time and memory).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "config/sweep_spec.hpp"
#include "plan/threads.hpp"

namespace rcsweep::plan {
namespace {

Plan plan_of(const std::string& model, const std::string& axes) {
  return make_plan(config::parse_sweep(
      "[sweep]\nname = \"t\"\nseed = 1\nreplicates = 1\n[model]\n" + model + "\n[axes]\n" + axes + "\n", "test"));
}

TEST(ThreadMode, SmallTasksRunConcurrentlyBigOnesSplitTheirLayers) {
  const Plan small = plan_of("T = 24\nd = 32\ndepth = 2", "lambda = [0.0, 0.5, 1.0]");
  const auto& bundle = small.bundles.front().tasks;
  EXPECT_EQ(thread_mode(small, bundle, 2), ThreadMode::tasks);
  EXPECT_EQ(thread_mode(small, bundle, 1), ThreadMode::layer);            // one thread: nothing to share
  EXPECT_EQ(thread_mode(small, {bundle.front()}, 2), ThreadMode::layer);  // one task
  const Plan big = plan_of("mixer = \"softmax\"\ninput = \"sphere\"\nT = 4096\nd = 512\ndepth = 2",
                           "lambda = [0.0, 1.0]");
  ASSERT_GE(layer_flops(big.models.front()), layer_split_min_flops);
  EXPECT_EQ(thread_mode(big, big.bundles.front().tasks, 2), ThreadMode::layer);
}

TEST(ThreadMode, UnitTimeAndMemory) {
  // tasks mode: the longest-first hand-out of the tasks to the threads, plus the shared work once
  EXPECT_DOUBLE_EQ(unit_seconds(ThreadMode::tasks, {3.0, 2.0, 2.0, 1.0}, 0.5, 2), 0.5 + 4.0);
  EXPECT_DOUBLE_EQ(unit_seconds(ThreadMode::tasks, {3.0, 2.0}, 0.0, 1), 5.0);
  EXPECT_DOUBLE_EQ(unit_seconds(ThreadMode::layer, {3.0, 2.0}, 1.0, 2), 3.0);
  Bundle b;
  b.shared_bytes = 100;
  b.state_bytes = 40;
  b.scratch_bytes = 10;
  EXPECT_EQ(unit_bytes(b, ThreadMode::layer, 4, 8), 150u);
  EXPECT_EQ(unit_bytes(b, ThreadMode::tasks, 4, 8), 180u);  // four tasks' temporaries at once
  EXPECT_EQ(unit_bytes(b, ThreadMode::tasks, 4, 2), 160u);  // no more than the unit's tasks
}

// One task of each mixer first (the costliest mixer's first), then the rest, the costliest mixer's
// last: while one thread builds W_Q W_K^T, the others run tasks that do not wait for it.
TEST(TaskOrder, LeadersOfEachMixerFirstTheCostliestMixersRestLast) {
  const Plan plan = plan_of("T = 20\nd = 300\ndepth = 2\nsigma_qk = \"inv_sqrt_d\"",
                            "mixer = [\"softmax\", \"markov\", \"identity\"]\nlambda = [0.0, 0.5, 1.0]");
  const auto& tasks = plan.bundles.front().tasks;
  ASSERT_EQ(tasks.size(), 9u);
  const auto order = task_order(plan, tasks);
  std::vector<std::size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> all(tasks.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  EXPECT_EQ(sorted, all);  // a permutation
  const auto mixer = [&](std::size_t i) { return plan.models.at(plan.tasks.at(tasks[order[i]]).point).mixer; };
  // the costliest mixer leads and closes
  const auto first = mixer(0);
  EXPECT_NE(mixer(1), first);
  EXPECT_NE(mixer(2), first);
  EXPECT_NE(mixer(1), mixer(2));
  EXPECT_EQ(mixer(7), first);
  EXPECT_EQ(mixer(8), first);
  EXPECT_EQ(first, config::Mixer::softmax);  // at d = 300 its W_Q W_K^T makes it the costliest
  // one mixer: longest first, i.e. bundle order for equal costs
  const Plan one = plan_of("T = 20\nd = 30\ndepth = 2", "lambda = [0.0, 0.5, 1.0]");
  EXPECT_EQ(task_order(one, one.bundles.front().tasks), (std::vector<std::size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace rcsweep::plan
