// plan/bundle_job: a unit of the plan's tasks as models::run_bundle runs it.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "plan/bundle_job.hpp"
#include "plan/threads.hpp"

namespace rcsweep::plan {
namespace {

Plan plan_of(const std::string& axes, int replicates, const std::string& output) {
  return make_plan(config::parse_sweep("[sweep]\nname = \"t\"\nseed = 11\nreplicates = " + std::to_string(replicates) +
                                           "\n[model]\nT = 6\nd = 8\ndepth = 3\n[axes]\n" + axes + "\n[output]\n" +
                                           output + "\n",
                                       "test"));
}

TEST(BundleJob, CarriesTheTasksModelsSeedReplicateDepthAndRoute) {
  const Plan plan = plan_of("mixer = [\"softmax\", \"identity\"]", 2, "gradients = \"last\"");
  // tasks 1 and 3: replicate 1 of points 0 and 1
  const models::BundleJob job = bundle_job(plan, {1, 3}, 1);
  EXPECT_EQ(job.seed, 11u);
  EXPECT_EQ(job.replicate, 1);
  EXPECT_EQ(job.max_depth, 3);
  ASSERT_EQ(job.tasks.size(), 2u);
  EXPECT_EQ(job.tasks[0].id, 1u);
  EXPECT_EQ(job.tasks[1].id, 3u);
  EXPECT_EQ(job.tasks[0].model, &plan.models[0]);
  EXPECT_EQ(job.tasks[1].model, &plan.models[1]);
  EXPECT_EQ(job.tasks[0].exact_gradients, plan.exact_gradients(plan.models[0]));
  EXPECT_EQ(job.tasks[1].exact_gradients, plan.exact_gradients(plan.models[1]));
  EXPECT_NE(job.tasks[0].exact_gradients, job.tasks[1].exact_gradients);  // automatic: exact for the linear stack
  EXPECT_FALSE(job.concurrent);                                           // one thread
}

TEST(BundleJob, RecordsWhatThePlanStores) {
  const Plan plan = plan_of("lambda = [0.0, 1.0]", 1,
                            "spectra = \"last\"\nmixer_spectra = \"all\"\ngradients = \"all\"\ngrad_probes = 3\n"
                            "metrics = [\"sr_cov\"]");
  const models::Recording r = bundle_job(plan, {0}, 1).recording;
  EXPECT_EQ(r.metrics, plan.spec.output.metrics);
  for (int l = -1; l <= plan.max_depth + 1; ++l) {
    EXPECT_EQ(r.spectrum_at(l), plan.spectrum_at(l)) << l;
    EXPECT_EQ(r.mixer_spectrum_at(l), plan.mixer_spectrum_at(l)) << l;
  }
  EXPECT_EQ(r.gradient_depths, plan.gradient_depths());
  EXPECT_EQ(r.grad_probes, 3);
}

TEST(BundleJob, ThreadsTakeTheTasksInThePlansOrder) {
  const Plan plan = plan_of("lambda = [0.0, 0.5, 1.0]", 1, "");
  const auto& tasks = plan.bundles.front().tasks;
  const models::BundleJob two = bundle_job(plan, tasks, 2);
  ASSERT_EQ(thread_mode(plan, tasks, 2), ThreadMode::tasks);
  EXPECT_TRUE(two.concurrent);
  EXPECT_EQ(two.order, task_order(plan, tasks));
  EXPECT_FALSE(bundle_job(plan, tasks, 1).concurrent);
}

TEST(BundleJob, RefusesTasksOfSeveralReplicatesUnknownIdsAndNone) {
  const Plan plan = plan_of("lambda = [0.0, 1.0]", 2, "");
  EXPECT_THROW(bundle_job(plan, {0, 1}, 1), Error);  // replicates 0 and 1
  EXPECT_THROW(bundle_job(plan, {0, 99}, 1), Error);
  EXPECT_THROW(bundle_job(plan, {}, 1), Error);
  EXPECT_NO_THROW(bundle_job(plan, {0, 2}, 1));
}

}  // namespace
}  // namespace rcsweep::plan
