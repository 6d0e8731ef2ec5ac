// Predicted run time of a plan from measured rates of this machine. Pure: the
// rates are measured elsewhere (`rcsweep calibrate`, src/plan/calibration.cpp) and passed in.
//
// A task's layer is priced by kind of work, each at its own measured rate: matrix products at the
// dgemm rate for their smallest dimension (small products run far below peak), the per-layer
// metrics at the measured time of signal_metrics / mixer_metrics for that size, entrywise maps
// (exp, norms) per entry, random normals per number. Work shared by a bundle (its weights, input-
// independent mixers and their metrics, the shared W_Q W_K^T, layer 0's metrics of the shared X_0
// and layer 1's products with it) is priced once per unit of work that computes it: a bundle run in
// k slices on k ranks repeats it k times (plan/schedule.hpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.hpp"
#include "plan/schedule.hpp"

namespace rcsweep::plan {

/// Measured rates. Tables are (size, value) pairs with increasing size, interpolated log-log and
/// extrapolated with the last segment's power law.
struct Calibration {
  std::string machine;  ///< what it was measured on (CPU model, BLAS core): a stored one is reused only there
  std::vector<std::pair<double, double>> gemm_rate;  ///< (n, flop/s) of an n x n x n dgemm, 1 thread
  std::vector<std::pair<double, double>> signal_s;   ///< (k, s) signal_metrics of a Gaussian k x k X
  std::vector<std::pair<double, double>> mixer_s;    ///< (T, s) mixer_metrics of a softmax T x T M
  std::vector<std::pair<double, double>> svd_s;      ///< (k, s) all singular values (dgesdd) of k x k
  double normal_rate = 1.0e8;                        ///< standard normals per second (rng::fill_normal)
  double exp_rate = 2.0e8;                           ///< softmax entries per second (exp, sum, scale)
  double pass_rate = 1.0e9;                          ///< entries per second of a simple pass (norms, skip, scaling)
  double conv_rate = 1.6e10;                         ///< multiply-adds per second of the S4D causal convolution
  double task_layer_s = 0.0;                         ///< fixed cost per task and layer (bookkeeping, allocation)
  /// The products BLIS multiplies faster than OpenBLAS here, as linalg::BlisRange: m n k in
  /// (first, second] of those without transposes (A B) and of those with one (A B^T); (0, 0) (the
  /// default, and without BLIS): none.
  std::pair<double, double> blis_plain{0.0, 0.0}, blis_transposed{0.0, 0.0};
  /// What they were chosen from: (n, BLIS's time / OpenBLAS's) of A B and of A B^T for n x n
  /// (measure_blis_range); empty without BLIS.
  std::vector<std::pair<double, double>> blis_plain_ratio, blis_transposed_ratio;
};

/// Rough rates of a small x86-64 server, used when no calibration of this machine is stored
/// (predictions then carry no guarantee).
Calibration default_calibration();

/// `c` as TOML text, and back. parse_calibration throws rcsweep::Error on a malformed text.
std::string to_toml(const Calibration& c);
Calibration parse_calibration(const std::string& text);

/// Interpolate a (size, value) table at `x`, log-log, extrapolating with the end segments.
double interpolate(const std::vector<std::pair<double, double>>& table, double x);

/// The tasks `tasks` (of one bundle) priced apart: each task's own work and the work one unit of
/// them shares, whichever of them it holds (the bundle's shared work for all of them: an upper
/// bound for a slice whose tasks use fewer of its mixers or inputs, exact for a scan of λ).
BundleWork bundle_work(const Plan& plan, const std::vector<std::uint64_t>& tasks, const Calibration& c);

/// Predicted seconds of one bundle (all of its tasks, one core) and of the whole plan's bundles.
double bundle_seconds(const Plan& plan, const Bundle& bundle, const Calibration& c);
double plan_seconds(const Plan& plan, const Calibration& c);

}  // namespace rcsweep::plan
