// Per-layer metrics of MODELS.md "Metrics". Pure functions of their inputs.
//
// The signal is passed as (X, log_scale): the true X_l is X * exp(log_scale). This lets the
// engine carry X at unit norm through homogeneous layers (MODELS.md "Scale"). All
// scale-invariant metrics are computed from a copy of X scaled to unit Frobenius norm, so nothing
// overflows; s1, s2 and mu are reported at the true scale (relative value * fro), and may be
// +inf only when the true value exceeds the double range (log_fro stays finite).
#pragma once
#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <vector>

#include "base/matrix.hpp"
#include "linalg/lanczos.hpp"
#include "metrics/metric_names.hpp"

namespace rcsweep::metrics {

inline constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// Metrics of the signal X_l (T x d).
struct SignalMetrics {
  double fro = nan;      ///< ||X||_F
  double log_fro = nan;  ///< ln ||X||_F (finite even when fro overflows)
  double s1 = nan;       ///< largest singular value of X
  double s2 = nan;       ///< second singular value of X (0 when min(T,d) = 1)
  double sr_cov = nan;   ///< stable rank of X X^T: sum s_i^4 / s_1^4 (Mind the Gap eq. (5))
  double sr_x = nan;     ///< stable rank of X: sum s_i^2 / s_1^2
  double mu = nan;       ///< ||X - 1 xbar^T||_F, xbar the token (row) mean (lambda-skip eq. (5))
  double mu_rel = nan;   ///< mu / ||X||_F
  double res_rel = nan;  ///< ||X - 1 xbar^T||_{1,inf} / ||X||_{1,inf} (Dong et al. §2)
  /// min_x ||X - 1 x^T||_{1,inf} / ||X||_{1,inf} (Dong et al. §2.2), certified within
  /// best_residual_tolerance (best_residual.hpp); opt-in (SignalNeeds::best_residual)
  double res_best = nan;
};

/// Metrics of a layer's mixer matrix M (T x T) after gap_fix (Mind the Gap Thm 2.1).
struct MixerMetrics {
  double m_s1 = nan;   ///< s_1(M)
  double m_s2 = nan;   ///< s_2(M)
  double m_gap = nan;  ///< s_1(M) / s_2(M)
  double m_fro = nan;  ///< ||M||_F
};

/// Compute SignalMetrics of X * exp(log_scale). If `spectrum` is non-null it receives all
/// min(T,d) singular values of X / ||X||_F (descending; unit Frobenius normalisation).
/// A zero or non-finite X gives NaN metrics (the caller decides whether that is a divergence).
/// `max_abs_x` >= 0 is max |x| of X as finite_max_abs found it, which spares a pass over X.
/// `needs` skips parts (their metrics NaN); with a spectrum wanted, s_1, s_2 and the sums come
/// from it.
SignalMetrics signal_metrics(const Matrix& X, double log_scale, std::vector<double>* spectrum = nullptr,
                             double max_abs_x = -1.0, SignalNeeds needs = {});

/// Largest |x| of X, NaN when an entry is not finite: one pass (over the metrics' row parts on the
/// rank's threads) for a layer's finite check and its scale, which signal_metrics then takes.
double finite_max_abs(const Matrix& X);

/// Compute MixerMetrics of M. s_1, s_2 to 1e-12 relative: by Lanczos (linalg::top_singular_values)
/// for T >= mixer_lanczos_min_order, else (or when Lanczos does not converge) by spectral_summary.
/// `products`, when given, is the same M as an operator with cheaper products (the SSD mixer's
/// scans, models::ssd_operator), which the Lanczos route then uses instead of M's entries.
/// `needs` skips s_1, s_2 (m_s1, m_s2, m_gap NaN; m_fro always computed).
MixerMetrics mixer_metrics(const Matrix& M, const linalg::LinearOperator* products = nullptr, MixerNeeds needs = {});
inline constexpr std::size_t mixer_lanczos_min_order = 256;

/// ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf): max column abs sum times max row abs sum, square-rooted.
double norm_1_inf(const Matrix& A);

/// The part of a spectrum the metrics need: s_1, s_2, sum (s_i/s_1)^2 and sum (s_i/s_1)^4, from
/// the Gram eigenvalues when that is exact to ~1e-12 relative; for a collapsed spectrum (s_2 / s_1
/// below that) s_1 and s_2 by Lanczos (linalg::top_singular_values) and the sums from the Gram
/// matrix; else (or when `want_all`) from the singular-value decomposition, whose values are then
/// in `sv` (descending). Without `second`, s_2 is not wanted: the Gram route then gives s_1 and
/// the sums at any spectrum (s_2 NaN).
struct SpectralSummary {
  enum class Route { none, gram, svd, lanczos };
  double s1 = nan, s2 = nan, sum2 = 0.0, sum4 = 0.0;
  std::vector<double> sv;  ///< all singular values (SVD route only)
  Route route = Route::none;
};
/// s_2^2 / s_1^2 above which the Gram route is used (its s_2 then has relative error
/// <~ k eps / (2 gram_threshold); measured in tests/unit/metrics against the SVD).
inline constexpr double gram_threshold = 1e-3;
SpectralSummary spectral_summary(const Matrix& A, bool want_all, bool second = true);

/// One layer's metrics, in layer_metric_names order (a row of /layers/<metric>).
using LayerRow = std::array<double, n_layer_metrics>;

/// The values of one layer in layer_metric_names order; the metrics not in `selected` are NaN.
LayerRow to_row(const SignalMetrics& x, const MixerMetrics& m, const MetricSet& selected = all_metrics());

}  // namespace rcsweep::metrics
