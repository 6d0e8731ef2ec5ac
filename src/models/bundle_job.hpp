// What models::run_bundle needs to run a bundle of tasks (same replicate, T, d): the tasks'
// models, the sweep's seed, the replicate, the depth, what to record, and how the rank's threads
// share the tasks. Plain data, filled by the planner (plan/bundle_job.hpp) or a test; the models
// module never sees the plan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "config/params.hpp"
#include "metrics/metric_names.hpp"

namespace rcsweep::models {

/// What a run records besides every layer's metrics ([output], CONFIG.md), the same for every task
/// of the job. Layers are 0..BundleJob::max_depth.
struct Recording {
  metrics::MetricSet metrics = metrics::default_metrics();  ///< the selected layer metrics ([output] metrics)
  std::vector<bool> spectrum_layers;        ///< [l]: layer l stores the spectrum of X (size max_depth + 1)
  std::vector<bool> mixer_spectrum_layers;  ///< [l]: layer l stores head 0's mixer spectrum (size max_depth + 1)
  std::vector<int> gradient_depths;         ///< output depths with stored gradient norms, ascending
  int grad_probes = 8;                      ///< Hutchinson probes per task and output depth

  bool spectrum_at(int layer) const { return at(spectrum_layers, layer); }
  bool mixer_spectrum_at(int layer) const { return at(mixer_spectrum_layers, layer); }

 private:
  static bool at(const std::vector<bool>& layers, int layer) {
    return layer >= 0 && static_cast<std::size_t>(layer) < layers.size() && layers[static_cast<std::size_t>(layer)];
  }
};

/// One task of a job: its id (reported back in TaskOutput::task) and its resolved model (not
/// owned: it outlives the job).
struct JobTask {
  std::uint64_t id = 0;
  const config::ModelParams* model = nullptr;
  bool exact_gradients = false;  ///< its gradient norms by the exact (Kronecker) route, else Hutchinson's
};

/// A bundle to run: tasks that share their random tensors (same replicate, T and d: run_bundle
/// throws an Error otherwise), each run to max_depth.
struct BundleJob {
  std::uint64_t seed = 0;  ///< the sweep's seed ([sweep] seed)
  int replicate = 0;
  int max_depth = 0;  ///< L_max: layers 0..max_depth per task
  std::vector<JobTask> tasks;
  Recording recording;
  /// How the rank's threads share the tasks (plan/threads.hpp): concurrently, one task per thread,
  /// taken in `order` (indices into `tasks`); or one after the other, each layer split over the
  /// threads. The results are bitwise the same either way.
  bool concurrent = false;
  std::vector<std::size_t> order;
};

}  // namespace rcsweep::models
