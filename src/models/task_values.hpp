// The values a task records: what models::run_bundle computes (TaskOutput) and what the store
// writes and reads back (store::TaskResult) share them, one definition.
#pragma once
#include <vector>

#include "metrics/metrics.hpp"
#include "models/theory.hpp"

namespace rcsweep::models {

struct TaskValues {
  /// layers[l]: metrics of layer l = 0..L_max, in metrics::layer_metric_names order (mixer
  /// metrics are NaN at layer 0; every value is NaN from the layer where a task ended early).
  std::vector<metrics::LayerRow> layers;
  /// spectra[l]: singular values of X_l / ||X_l||_F when plan.spectrum_at(l), else empty.
  std::vector<std::vector<double>> spectra;
  /// mixer_sv[l]: all T singular values of head 0's M of layer l (after gap_fix), descending, and
  /// mixer_eig_re/im[l]: its T eigenvalues (linalg::eigenvalues order), when
  /// plan.mixer_spectrum_at(l) and the task reached layer l, else empty (or absent).
  std::vector<std::vector<double>> mixer_sv, mixer_eig_re, mixer_eig_im;
  /// lambda-skip Theorem 4.1 quantities (models::theory_names order, /theory/<name>); NaN unless
  /// the task is done.
  TheoryRow theory = nan_theory();
  /// Gradient norms when [output] gradients is set: grad_log10[k * L_max + l - 1] = log10 g_{L,l}
  /// for L = plan.gradient_depths()[k], l = 1..L (NaN for l > L or unless done), and the standard
  /// error of each (0 on the exact route). Empty when no gradients are asked for (or failed).
  std::vector<double> grad_log10, grad_stderr;
};

}  // namespace rcsweep::models
