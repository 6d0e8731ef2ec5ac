// Per-task quantities of lambda-skip Theorem 4.1 (MODELS.md "Per-task theory"), and whether the
// theorem's hypotheses hold for a task.
#pragma once
#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <vector>

#include "base/matrix.hpp"
#include "config/params.hpp"

namespace rcsweep::models {

/// Names of /theory/<name> (float64 [n_tasks]) in storage order.
inline constexpr std::array<std::string_view, 8> theory_names = {
    "C_M", "S", "lambda_min", "a_star", "b", "bound_applies", "bound_holds", "bound_reason"};
inline constexpr std::size_t n_theory = theory_names.size();
using TheoryRow = std::array<double, n_theory>;

/// /theory/bound_reason: why Theorem 4.1's bound applies to a task or not (stored as float64, like
/// every /theory value). The first hypothesis that fails, in this order; `applies` when none does.
enum class BoundReason : int {
  applies = 0,          ///< every hypothesis holds: bound_applies = 1
  not_covered = 1,      ///< the stack is not lambda-skip eq. (6) (theorem_covers is false)
  rows_not_unit = 2,    ///< a row of some X_l, l = 0..L-1 (the input included), is not of unit norm
  condition_fails = 3,  ///< condition (7) fails: lambda^2 - a (S C_M + |lambda|)^2 <= 0
  mu0_below_b = 4,      ///< mu(X_0)^2 < b
};

/// The largest | ||x_i||_2 - 1 | of a row that counts as a unit row: rounding of a row divided by
/// its norm, or of an orthonormal input, stays far below it; any deliberate scale is far above.
inline constexpr double unit_row_tolerance = 1e-9;

/// True when every layer of `model` has the form the proof of Theorem 4.1 treats, lambda-skip
/// eq. (6): X' = D (M X C_V + lambda X) with one mixer matrix M and one value map C_V (one head,
/// not the per-channel s4d mixer; skip_scale is part of C_V), no gate, no MLP, and D the row
/// normalisation of eq. (4) (norm = "rms"; LayerNorm proper centres the rows and scales them to
/// norm sqrt(d)). Any mixer matrix and gap_fix qualify: the proof only uses ||M||_F <= C_M.
bool theorem_covers(const config::ModelParams& model) noexcept;

/// max over the rows x_i of X of | ||x_i||_2 - 1 |, with X_true = X * 2^log2_scale (the engine's
/// power-of-two scale; 0 for a stack with a norm). +inf for a non-finite or overflowing row, 0 for
/// a matrix without rows.
double row_norm_deviation(const Matrix& X, long log2_scale = 0);

/// Inputs of the theorem for one task.
struct TheoryInputs {
  double C_M = 0.0;      ///< max over layers and heads of ||M_l||_F
  double S = 0.0;        ///< max over layers of ||C_V,l||_F (W_V for attention, I_d for SSMs)
  double lambda = 0.0;   ///< skip strength
  double a = 0.9;        ///< collapse rate (config `collapse_rate`)
  int N = 0;             ///< tokens T
  int d = 0;             ///< width
  int L = 0;             ///< depth
  double log_mu0 = 0.0;  ///< ln mu(X_0) (logs: mu of a deep unnormalised stack overflows)
  double log_muL = 0.0;  ///< ln mu(X_L)
  bool covered = false;  ///< theorem_covers(model)
  /// max over l = 0..L-1 of row_norm_deviation(X_l) (the layers whose rows the proof takes as
  /// unit; NaN: not known, which counts as not unit)
  double row_deviation = std::numeric_limits<double>::quiet_NaN();
};

/// NaN row (a task that did not finish).
TheoryRow nan_theory();

/// lambda_min = (a + sqrt a) S C_M / (1 - a); a_star = lambda^2 / (S C_M + |lambda|)^2;
/// b = 2 |lambda| N d S C_M / (lambda^2 - a (S C_M + |lambda|)^2) / a^L (NaN when the condition
/// fails); bound_reason = the first BoundReason that fails (covered, rows unit within
/// unit_row_tolerance, condition (7), mu0^2 >= b) or `applies`; bound_applies = 1 for `applies`,
/// else 0; bound_holds = muL^2 >= a^L mu0^2 (1/0). Where mu is NaN (not computed) bound_holds is
/// NaN, and bound_applies and bound_reason are NaN when only mu0^2 >= b is left to decide.
TheoryRow theory_row(const TheoryInputs& in);

}  // namespace rcsweep::models
