// best_residual: min_x ||X - 1 x^T||_{1,inf} / ||X||_{1,inf} (Dong et al. §2.2) against an
// exhaustive search with a proven bound on tiny X, closed forms, res_rel, invariances and threads.
#include "metrics/best_residual.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/parallel.hpp"
#include "metrics/metrics.hpp"

namespace rcsweep::metrics {
namespace {

Matrix random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  Matrix a(m, n);
  for (double& x : a.values()) x = dist(gen);
  return a;
}

// a(x) = max column abs sum and b(x) = max row abs sum of X - 1 x^T, written out.
std::pair<double, double> composite_parts(const Matrix& X, const std::vector<double>& x) {
  double a = 0.0, b = 0.0;
  for (std::size_t j = 0; j < X.cols(); ++j) {
    double s = 0.0;
    for (std::size_t i = 0; i < X.rows(); ++i) s += std::abs(X(i, j) - x[j]);
    a = std::max(a, s);
  }
  for (std::size_t i = 0; i < X.rows(); ++i) {
    double s = 0.0;
    for (std::size_t j = 0; j < X.cols(); ++j) s += std::abs(X(i, j) - x[j]);
    b = std::max(b, s);
  }
  return {a, b};
}

double norm_of(const Matrix& X) {
  const auto [a, b] = composite_parts(X, std::vector<double>(X.cols(), 0.0));
  return std::sqrt(a * b);
}

// Every x on a grid of n points per column over the column's range (the minimiser lies in it:
// clipping x_j to the range shrinks every |X_ij - x_j|). With half-spacings h_j, a point g nearest
// the minimiser x* has a(x*) >= a(g) - T max h_j and b(x*) >= b(g) - sum h_j, so the least
// (a(g) - T max h)(b(g) - sum h) over the grid bounds the minimum from below, and the least a(g)
// b(g) from above. Returns {lower, upper} of min_x ||X - 1 x^T||_{1,inf}.
std::pair<double, double> grid_search(const Matrix& X, std::size_t n) {
  const std::size_t T = X.rows(), d = X.cols();
  std::vector<double> lo(d), step(d);
  double hmax = 0.0, hsum = 0.0;
  for (std::size_t j = 0; j < d; ++j) {
    double mn = X(0, j), mx = X(0, j);
    for (std::size_t i = 0; i < T; ++i) mn = std::min(mn, X(i, j)), mx = std::max(mx, X(i, j));
    lo[j] = mn;
    step[j] = (mx - mn) / static_cast<double>(n - 1);
    hmax = std::max(hmax, step[j] / 2), hsum += step[j] / 2;
  }
  double lower = std::numeric_limits<double>::infinity(), upper = lower;
  std::vector<std::size_t> k(d, 0);
  std::vector<double> x(d);
  for (;;) {
    for (std::size_t j = 0; j < d; ++j) x[j] = lo[j] + static_cast<double>(k[j]) * step[j];
    const auto [a, b] = composite_parts(X, x);
    upper = std::min(upper, a * b);
    lower = std::min(lower, std::max(a - static_cast<double>(T) * hmax, 0.0) * std::max(b - hsum, 0.0));
    std::size_t j = 0;
    while (j < d && ++k[j] == n) k[j++] = 0;
    if (j == d) break;
  }
  return {std::sqrt(lower), std::sqrt(upper)};
}

// The returned value is the composite norm at the returned x, and within the tolerance of its
// own lower bound.
void expect_consistent(const Matrix& X, const BestResidual& r, const std::vector<double>& x) {
  const auto [a, b] = composite_parts(X, x);
  // x in the units of X: its differences with X round to ~eps of ||X||, not of the value
  EXPECT_NEAR(r.value, std::sqrt(a * b) / norm_of(X), 1e-12 * r.value + 1e-14);
  EXPECT_LE(r.lower, r.value);
  EXPECT_LE(r.value, r.lower * (1.0 + best_residual_tolerance) * (1.0 + 1e-12) + best_residual_floor);
}

TEST(BestResidual, MatchesAnExhaustiveSearchOnTinyMatrices) {
  int checked = 0;
  for (unsigned seed = 1; seed <= 12; ++seed)
    for (std::size_t T : {2, 3, 4})
      for (std::size_t d : {1, 2, 3}) {
        const Matrix X = random_matrix(T, d, seed * 100 + static_cast<unsigned>(T * 10 + d));
        const std::size_t n = d == 1 ? 20001 : d == 2 ? 601 : 61;
        const auto [lower, upper] = grid_search(X, n);
        std::vector<double> x;
        const BestResidual r = best_residual(X, &x);
        SCOPED_TRACE(testing::Message() << T << "x" << d << " seed " << seed);
        expect_consistent(X, r, x);
        const double norm = norm_of(X);
        EXPECT_GE(r.value * norm, lower * (1.0 - 1e-12));                                    // an upper bound
        EXPECT_LE(r.value * norm, upper * (1.0 + best_residual_tolerance) * (1.0 + 1e-12));  // certified
        EXPECT_LE(r.lower * norm, upper * (1.0 + 1e-12));                                    // a lower bound
        ++checked;
      }
  EXPECT_EQ(checked, 108);
}

// T = 2, rows u and v: a(x) >= max_j |u_j - v_j| and b(x) >= ||u - v||_1 / 2, both attained at the
// midpoint (the mean): the minimum is sqrt(||u - v||_inf ||u - v||_1 / 2), which res_rel is too.
TEST(BestResidual, TwoTokensHaveTheClosedForm) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Matrix X = random_matrix(2, 7, seed);
    double linf = 0.0, l1 = 0.0;
    for (std::size_t j = 0; j < 7; ++j)
      linf = std::max(linf, std::abs(X(0, j) - X(1, j))), l1 += std::abs(X(0, j) - X(1, j));
    const double expected = std::sqrt(linf * l1 / 2.0) / norm_of(X);
    const BestResidual r = best_residual(X);
    EXPECT_NEAR(r.value, expected, 1e-12 * expected);
    EXPECT_NEAR(signal_metrics(X, 0.0).res_rel, expected, 1e-12 * expected);
  }
}

// One non-zero column c: the other x_j are 0, and a(x_0) b(x_0) = sum_i |c_i - x_0| max_i |c_i - x_0|
// is a product of two functions linear between the breakpoints (the c_i and the midrange), where it
// is monotone or concave: its minimum is at a breakpoint.
TEST(BestResidual, OneNonZeroColumnHasItsMinimumAtABreakpoint) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Matrix c = random_matrix(9, 1, seed);
    Matrix X(9, 4, 0.0);
    double mn = c(0, 0), mx = c(0, 0);
    for (std::size_t i = 0; i < 9; ++i) X(i, 2) = c(i, 0), mn = std::min(mn, c(i, 0)), mx = std::max(mx, c(i, 0));
    std::vector<double> candidates(c.values().begin(), c.values().end());
    candidates.push_back((mn + mx) / 2);
    double best = std::numeric_limits<double>::infinity();
    for (double x0 : candidates) {
      const auto [a, b] = composite_parts(X, {0.0, 0.0, x0, 0.0});
      best = std::min(best, std::sqrt(a * b));
    }
    std::vector<double> x;
    const BestResidual r = best_residual(X, &x);
    expect_consistent(X, r, x);
    EXPECT_GE(r.value, best / norm_of(X) * (1.0 - 1e-12));
    EXPECT_LE(r.value, best / norm_of(X) * (1.0 + best_residual_tolerance));
  }
}

TEST(BestResidual, CollapsedSignalsAndOneTokenAreZero) {
  Matrix X(5, 3);
  for (std::size_t i = 0; i < 5; ++i) X(i, 0) = 1.5, X(i, 1) = -2.0, X(i, 2) = 1e-3;  // X = 1 c^T
  EXPECT_EQ(best_residual(X).value, 0.0);
  EXPECT_EQ(best_residual(X).lower, 0.0);
  std::vector<double> x;
  const Matrix one = random_matrix(1, 6, 3);
  EXPECT_EQ(best_residual(one, &x).value, 0.0);  // T = 1: x is the row
  EXPECT_EQ(x, std::vector<double>(one.values().begin(), one.values().end()));
  // Rows equal but for a few ulps (a pure-attention stack a few layers deep): certified to the
  // floor, where the rounding of X decides, never NaN.
  Matrix ulps = random_matrix(16, 24, 5);
  const Matrix row = random_matrix(1, 24, 6);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 24; ++j) ulps(i, j) = row(0, j) * (1.0 + 4e-16 * ulps(i, j));
  const BestResidual u = best_residual(ulps, &x);
  expect_consistent(ulps, u, x);
  EXPECT_LE(u.value, 1e-13);
}

// As res_rel: NaN for 0 / 0 (X = 0), a non-finite or an empty X.
TEST(BestResidual, ZeroNonFiniteAndEmptyAreNaN) {
  EXPECT_TRUE(std::isnan(best_residual(Matrix(4, 3, 0.0)).value));
  EXPECT_TRUE(std::isnan(signal_metrics(Matrix(4, 3, 0.0), 0.0, nullptr, -1.0, {true, true, true, true}).res_best));
  Matrix X = random_matrix(4, 3, 1);
  X(2, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(best_residual(X).value));
  X(2, 1) = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(best_residual(X).value));
  EXPECT_TRUE(std::isnan(best_residual(Matrix(0, 3)).value));
  EXPECT_TRUE(std::isnan(best_residual(Matrix(3, 0)).value));
}

// Never above res_rel (the token mean is one of the x it tries), and certified, at the shapes of
// the papers' sweeps and beyond (wide, tall, square; a collapsing signal).
TEST(BestResidual, IsCertifiedAndNeverAboveResRel) {
  std::vector<Matrix> signals = {random_matrix(6, 5, 1), random_matrix(12, 8, 2), random_matrix(32, 96, 3),
                                 random_matrix(128, 768, 4), random_matrix(200, 16, 5)};
  Matrix collapsing = random_matrix(64, 48, 6);
  const Matrix row = random_matrix(1, 48, 7);
  for (std::size_t i = 0; i < 64; ++i)
    for (std::size_t j = 0; j < 48; ++j) collapsing(i, j) = row(0, j) + 1e-6 * collapsing(i, j);
  signals.push_back(collapsing);
  // Ties and flat directions: entries in {0, 1, 2}; mostly zeros (a single row decides b at the
  // medians, and the polygon needs the weighted problems' cuts); entries over 2^±20.
  std::mt19937_64 gen(8);
  for (const auto& [T, d] : {std::pair{15, 14}, std::pair{20, 2}, std::pair{32, 4}, std::pair{25, 29}}) {
    Matrix ties(T, d), sparse = random_matrix(T, d, 9), wild = random_matrix(T, d, 10);
    for (double& v : ties.values()) v = static_cast<double>(gen() % 3);
    for (double& v : sparse.values()) v = gen() % 5 == 0 ? v : 0.0;
    for (double& v : wild.values()) v = std::ldexp(v, static_cast<int>(gen() % 40) - 20);
    signals.insert(signals.end(), {ties, sparse, wild});
  }
  for (const Matrix& X : signals) {
    SCOPED_TRACE(testing::Message() << X.rows() << "x" << X.cols());
    std::vector<double> x;
    const BestResidual r = best_residual(X, &x);
    expect_consistent(X, r, x);
    EXPECT_LE(r.value, signal_metrics(X, 0.0).res_rel * (1.0 + 1e-12));
    EXPECT_GT(r.value, 0.0);
  }
}

// Adding 1 c^T leaves the minimum where it was; scaling X scales a, b and the norm alike. Powers of
// two are exact (the same bits); other changes agree to the certified tolerance.
TEST(BestResidual, InvariantToShiftsAndScale) {
  const Matrix X = random_matrix(20, 30, 11);
  const BestResidual r = best_residual(X);
  for (int k : {-600, -3, 5, 700}) {
    Matrix Y = X;
    for (double& v : Y.values()) v = std::ldexp(v, k);
    EXPECT_EQ(best_residual(Y).value, r.value) << k;
  }
  Matrix scaled = X, shifted = X;
  for (double& v : scaled.values()) v *= 3.7;
  const Matrix c = random_matrix(1, 30, 12);
  for (std::size_t i = 0; i < 20; ++i)
    for (std::size_t j = 0; j < 30; ++j) shifted(i, j) += 5.0 * c(0, j);
  // The shift changes the denominator ||X||_{1,inf}: compare the unnormalised minimum.
  const double tol = 2.0 * best_residual_tolerance;
  EXPECT_NEAR(best_residual(scaled).value, r.value, tol * r.value);
  const double min_x = r.value * norm_of(X), min_shifted = best_residual(shifted).value * norm_of(shifted);
  EXPECT_NEAR(min_shifted, min_x, tol * min_x);
}

// Serial code: the same bits on any number of threads, alone and inside signal_metrics.
TEST(BestResidual, ThreadCountChangesNoBit) {
  const Matrix X = random_matrix(64, 200, 21);
  const SignalNeeds needs{false, false, false, true};
  parallel::set_threads(1);
  const double one = best_residual(X).value, in_metrics = signal_metrics(X, 0.3, nullptr, -1.0, needs).res_best;
  EXPECT_EQ(in_metrics, one);
  for (int n : {2, 3}) {
    parallel::set_threads(n);
    EXPECT_EQ(best_residual(X).value, one) << n;
    EXPECT_EQ(signal_metrics(X, 0.3, nullptr, -1.0, needs).res_best, one) << n;
  }
  parallel::set_threads(1);
}

// Opt-in: signal_metrics computes it only when asked; to_row stores it only when selected.
TEST(BestResidual, OnlyWhenSelected) {
  const Matrix X = random_matrix(10, 12, 31);
  EXPECT_TRUE(std::isnan(signal_metrics(X, 0.0).res_best));
  const SignalMetrics s = signal_metrics(X, 0.0, nullptr, -1.0, {true, true, true, true});
  EXPECT_EQ(s.res_best, best_residual(X).value);
  const std::size_t at = metric_index("res_best");
  EXPECT_TRUE(std::isnan(to_row(s, {}, default_metrics())[at]));
  MetricSet with = default_metrics();
  with.set(at);
  EXPECT_EQ(to_row(s, {}, with)[at], s.res_best);
}

}  // namespace
}  // namespace rcsweep::metrics
