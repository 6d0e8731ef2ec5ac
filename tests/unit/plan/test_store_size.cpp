// A store's layout and size (plan/store_size.hpp): which stores are allocated by task, their
// chunks, and the estimate's parts (tests/e2e/test_store_size.py compares it with real files).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/sweep_spec.hpp"
#include "plan/store_size.hpp"

namespace rcsweep {
namespace {

const std::string adaptive_rule = "[sweep.replicates]\nmin = 5\nmax = 40\nstep = 5\n"
                                  "targets = [{ metric = \"sr_cov\", layer = \"last\", rel_se = 0.1 }]\n";

plan::Plan make(const std::string& replicates, plan::Shard shard = {}, const std::string& output = "", int depth = 12) {
  const std::string text = "[sweep]\nname = \"s\"\nseed = 1\n" + replicates +
                           "\n[model]\nT = 8\nd = 8\ndepth = " + std::to_string(depth) +
                           "\n[axes]\nlambda = [0.0, 0.5, 1.0]\n[output]\n" + output + "\n";
  return plan::make_plan(config::parse_sweep(text, "test"), shard);
}

std::vector<bool> first(const plan::Plan& plan, int replicates) {
  std::vector<bool> ran(plan.tasks.size());
  for (const auto& t : plan.tasks) ran[t.id] = t.replicate < replicates;
  return ran;
}

TEST(StoreSize, ASweepThatRunsEveryTaskIsAllocatedAtCreation) {
  const auto plan = make("replicates = 20");
  const auto layout = plan::store_layout(plan);
  EXPECT_FALSE(layout.by_task);
  EXPECT_EQ(layout.task_rows, 60u);  // every task: at most 64 rows a chunk
  // Allocated in full: the size does not depend on what ran.
  EXPECT_EQ(plan::store_bytes(plan, first(plan, 0)), plan::store_bytes(plan, first(plan, 20)));
  const auto size = plan::store_size(plan);
  EXPECT_EQ(size.least, size.most);
}

TEST(StoreSize, AdaptiveStoresAreAllocatedByTaskInChunksOfAStep) {
  const auto plan = make(adaptive_rule);
  const auto layout = plan::store_layout(plan);
  EXPECT_TRUE(layout.by_task);
  EXPECT_EQ(layout.task_rows, 5u);
  EXPECT_EQ(layout.theory_rows, 5u);
  const double five = plan::store_bytes(plan, first(plan, 5)), ten = plan::store_bytes(plan, first(plan, 10)),
               all = plan::store_bytes(plan, first(plan, 40));
  EXPECT_LT(five, ten);
  EXPECT_LT(ten, all);
  // The per-task results grow in proportion: 5 more replicates of 3 points add 15 tasks' rows of 14
  // metrics x 13 layers and 8 theory values (and a little index).
  const double per_task = 14 * 13 * 8 + 8 * 8;
  EXPECT_NEAR(ten - five, 15 * per_task, 0.05 * 15 * per_task);
  const auto size = plan::store_size(plan);
  EXPECT_DOUBLE_EQ(size.least, five);
  EXPECT_DOUBLE_EQ(size.most, all);
}

TEST(StoreSize, AShardOfAFixedSweepHasOneTaskAChunk) {
  const auto whole = make("replicates = 20");
  const auto shard = make("replicates = 20", {1, 4});
  const auto layout = plan::store_layout(shard);
  EXPECT_TRUE(layout.by_task);
  EXPECT_EQ(layout.task_rows, 1u);
  const auto size = plan::store_size(shard);
  EXPECT_EQ(size.least, size.most);
  // A quarter of the results, all of the tables written at creation.
  EXPECT_LT(size.most, 0.75 * plan::store_size(whole).most);
}

TEST(StoreSize, SpectraAndGradientsAreCounted) {
  const auto none = plan::store_size(make("replicates = 4")).most;
  const auto plan = make("replicates = 4", {}, "spectra = \"all\"\ngradients = \"last\"");
  // spectra: 12 tasks x 13 layers x 8 values; their offsets 12 x 13; gradients 2 x 12 x 12
  const double more = 8.0 * (12 * 13 * 8 + 12 * 13 + 2 * 12 * 12);
  EXPECT_NEAR(plan::store_size(plan).most - none, more, 0.1 * more + 8192);
}

TEST(StoreSize, AnAdaptiveSweepWithoutSpectraStoresNoOffsets) {
  const auto fixed = make("replicates = 40");
  const auto adaptive = make(adaptive_rule);
  // Every task run: the adaptive store lacks the two offset tables (all -1: the fill value).
  const double offsets = 2.0 * 120 * 13 * 8;
  const double diff = plan::store_size(fixed).most - plan::store_size(adaptive).most;
  EXPECT_GT(diff, 0.5 * offsets);
}

}  // namespace
}  // namespace rcsweep
