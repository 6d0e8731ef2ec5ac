#include "plan/bundle_job.hpp"

#include <string>

#include "base/error.hpp"
#include "plan/threads.hpp"

namespace rcsweep::plan {

models::Recording recording(const Plan& plan) {
  models::Recording r;
  r.metrics = plan.spec.output.metrics;
  const auto layers = static_cast<std::size_t>(plan.max_depth + 1);
  r.spectrum_layers.resize(layers);
  r.mixer_spectrum_layers.resize(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    r.spectrum_layers[l] = plan.spectrum_at(static_cast<int>(l));
    r.mixer_spectrum_layers[l] = plan.mixer_spectrum_at(static_cast<int>(l));
  }
  r.gradient_depths = plan.gradient_depths();
  r.grad_probes = plan.spec.output.grad_probes;
  return r;
}

models::BundleJob bundle_job(const Plan& plan, const std::vector<std::uint64_t>& tasks, int threads) {
  if (tasks.empty()) throw Error("bundle_job: no tasks");
  models::BundleJob job;
  job.seed = plan.spec.seed;
  job.max_depth = plan.max_depth;
  job.recording = recording(plan);
  job.tasks.reserve(tasks.size());
  for (const auto id : tasks) {
    if (id >= plan.tasks.size()) throw Error("bundle_job: no task " + std::to_string(id) + " in the plan");
    const Task& t = plan.tasks[id];
    if (job.tasks.empty())
      job.replicate = t.replicate;
    else if (t.replicate != job.replicate)
      throw Error("bundle_job: task " + std::to_string(id) + " is not of this bundle");
    const config::ModelParams& model = plan.models.at(t.point);
    job.tasks.push_back({id, &model, plan.exact_gradients(model)});
  }
  job.concurrent = thread_mode(plan, tasks, threads) == ThreadMode::tasks;
  if (job.concurrent) job.order = task_order(plan, tasks);
  return job;
}

}  // namespace rcsweep::plan
