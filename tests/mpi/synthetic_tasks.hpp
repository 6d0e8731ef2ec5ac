// Synthetic tasks for scheduler tests and the writer benchmark: a result of the right shape for a
// real plan (every stored dataset filled, values derived from the task id so a test can check
// they arrived), and a bundle runner that sleeps a known time per task instead of computing.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "metrics/metrics.hpp"
#include "models/task_runner.hpp"
#include "plan/plan.hpp"

namespace rcsweep::test {

/// The value stored for metric k of layer l of `task` (and entry i of its spectra).
inline double synthetic_value(std::uint64_t task, int layer, std::size_t k) {
  return static_cast<double>(task) + 0.001 * layer + 1e-6 * static_cast<double>(k);
}

/// What run_bundle would report for `task`, with every array the plan stores at its full length.
inline models::TaskOutput synthetic_output(const plan::Plan& plan, std::uint64_t task, double seconds) {
  models::TaskOutput out;
  out.task = task;
  out.seconds = seconds;
  const int L1 = plan.max_depth + 1;
  out.layers.resize(static_cast<std::size_t>(L1));
  out.spectra.resize(static_cast<std::size_t>(L1));
  out.mixer_sv.resize(static_cast<std::size_t>(L1));
  out.mixer_eig_re.resize(static_cast<std::size_t>(L1));
  out.mixer_eig_im.resize(static_cast<std::size_t>(L1));
  for (int l = 0; l < L1; ++l) {
    const auto li = static_cast<std::size_t>(l);
    for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k) out.layers[li][k] = synthetic_value(task, l, k);
    if (plan.spectrum_at(l)) {
      out.spectra[li].resize(plan.spectrum_length(task));
      for (std::size_t i = 0; i < out.spectra[li].size(); ++i) out.spectra[li][i] = synthetic_value(task, l, i);
    }
    if (plan.mixer_spectrum_at(l)) {
      const auto n = plan.mixer_spectrum_length(task);
      out.mixer_sv[li].assign(n, synthetic_value(task, l, 0));
      out.mixer_eig_re[li].assign(n, synthetic_value(task, l, 1));
      out.mixer_eig_im[li].assign(n, 0.0);
    }
  }
  const auto depths = plan.gradient_depths();
  if (!depths.empty()) {
    out.grad_log10.assign(depths.size() * static_cast<std::size_t>(plan.max_depth), synthetic_value(task, 0, 2));
    out.grad_stderr.assign(out.grad_log10.size(), 0.0);
  }
  for (std::size_t i = 0; i < out.theory.size(); ++i) out.theory[i] = synthetic_value(task, 0, i);
  return out;
}

/// A BundleRunner (sweep/driver.hpp) whose task t sleeps seconds(t), then reports
/// synthetic_output: the scheduler sees tasks of known cost that need no CPU. The reported
/// seconds (the store's /tasks wall_s) are the time actually taken, late wake-ups included.
inline auto sleeping_runner(std::function<double(std::uint64_t)> seconds) {
  return [seconds = std::move(seconds)](const plan::Plan& plan, const std::vector<std::uint64_t>& tasks,
                                        const std::function<void(models::TaskOutput &&)>& on_done,
                                        const std::function<bool()>&) {
    // Sleep until each task's planned end, so oversleeping does not accumulate over a bundle.
    using clock = std::chrono::steady_clock;
    auto end = clock::now(), last = end;
    for (const auto t : tasks) {
      end += std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds(t)));
      std::this_thread::sleep_until(end);
      const auto now = clock::now();
      on_done(synthetic_output(plan, t, std::chrono::duration<double>(now - last).count()));
      last = now;
    }
  };
}

}  // namespace rcsweep::test
