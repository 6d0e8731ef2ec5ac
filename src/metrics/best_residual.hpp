// Dong et al.'s residual with the best row vector: min over x of ||X - 1 x^T||_{1,inf}, certified.
// Pure numerics (no I/O); serial, so the result is bitwise the same on any number of threads.
//
// Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank doubly
// exponentially with depth" (arXiv:2103.03404), §2.2: res(X) = X - 1 x^T, x = argmin_x ||X - 1 x^T||,
// with the composite norm ||A||_{1,inf} = sqrt(||A||_1 ||A||_inf) (max column abs sum times max row
// abs sum). res_rel takes x = the token mean; best_residual the minimising x.
//
// With a(x) = max_j sum_i |X_ij - x_j| and b(x) = max_i sum_j |X_ij - x_j| (convex), the minimum of
// a(x) b(x) lies at a point of the lower-left frontier of {(a(x), b(x))}, a convex curve. Upper
// bound: L-BFGS on log a + log b smoothed (log-sum-exp of Huber-smoothed sums), by stages of 10x
// smaller smoothing; the value is sqrt(a(x) b(x)) at the x found, exactly evaluated. Lower bound:
// every row weight p (simplex over tokens), column weight q (simplex over features) and alpha >= 0
// give alpha a(x) + b(x) >= D(alpha) = sum_j min_z sum_i (alpha q_j + p_i) |X_ij - z| for all x
// (weighted medians, exact), and a(x) >= a* (the column medians minimise a exactly); these cuts
// bound the frontier from below, and the least a b over the polygon they leave (at one of its
// corners) bounds the minimum from below. The softmax weights of the smoothed problem at its
// optimum are the cuts' weights; where that corner lies away from the best x, the smoothed weighted
// problem min alpha a + b adds cuts there. Stages continue until value <= lower (1 +
// best_residual_tolerance), or value - lower <= best_residual_floor.
#pragma once
#include <limits>
#include <vector>

#include "base/matrix.hpp"

namespace rcsweep::metrics {

/// The relative gap between the stored value and its proven lower bound.
inline constexpr double best_residual_tolerance = 1e-4;
/// Or, for a nearly collapsed X, the gap relative to ||X||_{1,inf}: below it the rounding of X's
/// entries (which X - 1 m^T, m the column medians, keeps) decides, not the method.
inline constexpr double best_residual_floor = 1e-12;
/// Its cost for the planner, in passes over X at the pass rate of `rcsweep calibrate` (a pass: a
/// norm of X): measured at 128 x 768 (bench_metrics BM_best_residual, docs/BENCHMARKS.md "The best
/// residual"); smaller shapes take fewer, some shapes several times more.
inline constexpr double best_residual_passes = 350.0;
/// The memory it holds besides X, in doubles per entry of X (a scaled and a centred copy, the
/// gradients' signs, the sorted columns and their rows), for the planner's scratch memory.
inline constexpr double best_residual_scratch = 4.5;

struct BestResidual {
  /// min_x ||X - 1 x^T||_{1,inf} / ||X||_{1,inf}: the composite norm at the returned x, an upper
  /// bound of the minimum within best_residual_tolerance of it (or best_residual_floor, for a nearly
  /// collapsed X). NaN for an empty, zero or
  /// non-finite X, or (not seen in tests) when the certificate is not reached.
  double value = std::numeric_limits<double>::quiet_NaN();
  /// A proven lower bound of the minimum, relative to ||X||_{1,inf}: value <= lower (1 + tol), or
  /// value - lower <= best_residual_floor.
  double lower = std::numeric_limits<double>::quiet_NaN();
  int iterations = 0;   ///< L-BFGS iterations, all stages
  int stages = 0;       ///< smoothing stages run
  int evaluations = 0;  ///< evaluations of the smoothed objective
};

/// The best residual of X (T x d, rows = tokens). `row`, when given, receives the x (length d, in
/// the units of X) at which `value` is attained.
BestResidual best_residual(const Matrix& X, std::vector<double>* row = nullptr);

}  // namespace rcsweep::metrics
