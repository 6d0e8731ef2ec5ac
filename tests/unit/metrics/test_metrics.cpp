// metrics: each metric against a naive implementation and against hand cases (MODELS.md
// "Metrics").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/parallel.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"

namespace rcsweep::metrics {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

Matrix random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  Matrix a(m, n);
  for (double& x : a.values()) x = dist(gen);
  return a;
}

Matrix scaled(const Matrix& a, double c) {
  Matrix b = a;
  for (double& x : b.values()) x *= c;
  return b;
}

// The definitions of MODELS.md written out directly, at moderate scale.
double naive_norm_1_inf(const Matrix& a) {
  double max_col = 0.0, max_row = 0.0;
  for (std::size_t j = 0; j < a.cols(); ++j) {
    double s = 0.0;
    for (std::size_t i = 0; i < a.rows(); ++i) s += std::abs(a(i, j));
    max_col = std::max(max_col, s);
  }
  for (std::size_t i = 0; i < a.rows(); ++i) {
    double s = 0.0;
    for (std::size_t j = 0; j < a.cols(); ++j) s += std::abs(a(i, j));
    max_row = std::max(max_row, s);
  }
  return std::sqrt(max_col * max_row);
}

SignalMetrics naive_signal(const Matrix& x, double log_scale) {
  const double c = std::exp(log_scale);
  SignalMetrics r;
  double ss = 0.0;
  for (double v : x.values()) ss += v * v;
  r.fro = std::sqrt(ss) * c;
  r.log_fro = std::log(r.fro);
  const auto sv = linalg::singular_values(x);
  r.s1 = sv[0] * c;
  r.s2 = (sv.size() >= 2 ? sv[1] : 0.0) * c;
  double s2sum = 0.0, s4sum = 0.0;
  for (double s : sv) {
    s2sum += s * s;
    s4sum += s * s * s * s;
  }
  r.sr_cov = s4sum / std::pow(sv[0], 4);
  r.sr_x = s2sum / (sv[0] * sv[0]);
  Matrix centred = x;
  for (std::size_t j = 0; j < x.cols(); ++j) {
    double mean = 0.0;
    for (std::size_t i = 0; i < x.rows(); ++i) mean += x(i, j);
    mean /= static_cast<double>(x.rows());
    for (std::size_t i = 0; i < x.rows(); ++i) centred(i, j) -= mean;
  }
  double cs = 0.0;
  for (double v : centred.values()) cs += v * v;
  r.mu = std::sqrt(cs) * c;
  r.mu_rel = r.mu / r.fro;
  r.res_rel = naive_norm_1_inf(centred) / naive_norm_1_inf(x);
  return r;
}

void expect_rel(double got, double want, double tol, const char* what) {
  EXPECT_NEAR(got, want, tol * std::max(std::abs(want), 1e-300)) << what;
}

// Scale-invariant metrics equal to relative tolerance tol.
void expect_same_shape(const SignalMetrics& a, const SignalMetrics& b, double tol) {
  expect_rel(a.sr_cov, b.sr_cov, tol, "sr_cov");
  expect_rel(a.sr_x, b.sr_x, tol, "sr_x");
  expect_rel(a.mu_rel, b.mu_rel, tol, "mu_rel");
  expect_rel(a.res_rel, b.res_rel, tol, "res_rel");
}

void expect_bitwise_same_shape(const SignalMetrics& a, const SignalMetrics& b) {
  EXPECT_EQ(a.sr_cov, b.sr_cov);
  EXPECT_EQ(a.sr_x, b.sr_x);
  EXPECT_EQ(a.mu_rel, b.mu_rel);
  EXPECT_EQ(a.res_rel, b.res_rel);
}

void expect_all_nan_shape(const SignalMetrics& m) {
  EXPECT_TRUE(std::isnan(m.s1));
  EXPECT_TRUE(std::isnan(m.s2));
  EXPECT_TRUE(std::isnan(m.sr_cov));
  EXPECT_TRUE(std::isnan(m.sr_x));
  EXPECT_TRUE(std::isnan(m.mu));
  EXPECT_TRUE(std::isnan(m.mu_rel));
  EXPECT_TRUE(std::isnan(m.res_rel));
}

TEST(MetricsSignal, MatchesNaiveOnRandomMatrices) {
  unsigned seed = 7;
  for (auto [t, d] : {std::pair<std::size_t, std::size_t>{4, 7}, {7, 4}, {6, 6}, {1, 5}, {5, 1}, {16, 3}})
    for (double log_scale : {0.0, -1.3, 2.5}) {
      const Matrix x = random_matrix(t, d, seed++);
      std::vector<double> spectrum;
      const SignalMetrics got = signal_metrics(x, log_scale, &spectrum);
      const SignalMetrics want = naive_signal(x, log_scale);
      SCOPED_TRACE(testing::Message() << t << "x" << d << " log_scale " << log_scale);
      expect_rel(got.fro, want.fro, 1e-13, "fro");
      EXPECT_NEAR(got.log_fro, want.log_fro, 1e-13);
      expect_rel(got.s1, want.s1, 1e-13, "s1");
      EXPECT_NEAR(got.s2, want.s2, 1e-13 * want.s1);
      expect_rel(got.sr_cov, want.sr_cov, 1e-12, "sr_cov");
      expect_rel(got.sr_x, want.sr_x, 1e-12, "sr_x");
      EXPECT_NEAR(got.mu, want.mu, 1e-13 * want.fro);
      EXPECT_NEAR(got.mu_rel, want.mu_rel, 1e-13);
      EXPECT_NEAR(got.res_rel, want.res_rel, 1e-13);
      // Spectrum: all min(T, d) singular values of X / ||X||_F, descending.
      const auto sv = linalg::singular_values(x);
      ASSERT_EQ(spectrum.size(), std::min(t, d));
      for (std::size_t i = 0; i < sv.size(); ++i)
        EXPECT_NEAR(spectrum[i], sv[i] * std::exp(log_scale) / want.fro, 1e-13);
    }
}

TEST(MetricsSignal, IdenticalRowsHaveZeroMu) {
  // X = 1 v^T: all tokens equal, so mu = res_rel = 0 exactly, and rank 1: sr = 1. Three rows of
  // 0.1 are chosen because 0.1 + 0.1 + 0.1 != 0.3 in floating point.
  const std::vector<double> v = {0.1, 0.3, -0.7, 2.0};
  Matrix x(3, 4);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) x(i, j) = v[j];
  const SignalMetrics m = signal_metrics(x, 0.0);
  EXPECT_EQ(m.mu, 0.0);
  EXPECT_EQ(m.mu_rel, 0.0);
  EXPECT_EQ(m.res_rel, 0.0);
  EXPECT_NEAR(m.sr_cov, 1.0, 1e-13);
  EXPECT_NEAR(m.sr_x, 1.0, 1e-13);
  EXPECT_NEAR(m.s2, 0.0, 1e-14);
}

TEST(MetricsSignal, RankOneHasStableRankOne) {
  const Matrix u = random_matrix(5, 1, 31), v = random_matrix(1, 8, 32);
  const Matrix x = linalg::matmul(u, v);
  const SignalMetrics m = signal_metrics(x, 0.0);
  EXPECT_NEAR(m.sr_cov, 1.0, 1e-13);
  EXPECT_NEAR(m.sr_x, 1.0, 1e-13);
  expect_rel(m.s1, m.fro, 1e-13, "s1 = fro for rank 1");
  EXPECT_GT(m.mu_rel, 0.0);  // rows differ (u has distinct entries)
}

TEST(MetricsSignal, OrthonormalRowsHaveStableRankT) {
  // Rows of an identity slice, and the default input X_0 = Q^T from a thin QR (MODELS.md "Inputs").
  const std::size_t t = 5, d = 9;
  Matrix slice(t, d);
  for (std::size_t i = 0; i < t; ++i) slice(i, i + 2) = 1.0;
  const Matrix q = linalg::thin_q(random_matrix(d, t, 41));
  Matrix x0(t, d);
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t j = 0; j < d; ++j) x0(i, j) = q(j, i);
  for (const Matrix* x : {&slice, &x0}) {
    const SignalMetrics m = signal_metrics(*x, 0.0);
    EXPECT_NEAR(m.sr_cov, static_cast<double>(t), 1e-12);
    EXPECT_NEAR(m.sr_x, static_cast<double>(t), 1e-12);
    EXPECT_NEAR(m.fro, std::sqrt(static_cast<double>(t)), 1e-13);
    EXPECT_NEAR(m.s1, 1.0, 1e-13);
    EXPECT_NEAR(m.s2, 1.0, 1e-13);
  }
  // Identity slice: xbar = e/T on the used columns, so mu^2 = T * (1 - 1/T) = T - 1 exactly.
  EXPECT_NEAR(signal_metrics(slice, 0.0).mu, std::sqrt(static_cast<double>(t - 1)), 1e-13);
}

TEST(MetricsSignal, ScaleInvariance) {
  const Matrix x = random_matrix(6, 10, 51);
  for (double c : {3.7, 1e-3, 12345.678}) {
    const SignalMetrics a = signal_metrics(scaled(x, c), 0.0);
    const SignalMetrics b = signal_metrics(x, std::log(c));
    SCOPED_TRACE(c);
    expect_same_shape(a, b, 1e-13);
    EXPECT_NEAR(a.log_fro, b.log_fro, 1e-13 * std::max(1.0, std::abs(a.log_fro)));
    expect_rel(a.fro, b.fro, 1e-13, "fro");
    expect_rel(a.s1, b.s1, 1e-13, "s1");
    expect_rel(a.s2, b.s2, 1e-13, "s2");
    expect_rel(a.mu, b.mu, 1e-13, "mu");
  }
}

TEST(MetricsSignal, ExtremeScalesStayFinite) {
  const Matrix x = random_matrix(5, 8, 61);
  const SignalMetrics ref = signal_metrics(x, 0.0);
  // Power-of-two scalings are exact and the unit-norm copy is renormalised by a power of two, so
  // the scale-invariant metrics are bitwise those of X.
  for (int p : {-1000, 1000}) {
    const SignalMetrics m = signal_metrics(scaled(x, std::ldexp(1.0, p)), 0.0);
    SCOPED_TRACE(p);
    expect_bitwise_same_shape(m, ref);
    EXPECT_NEAR(m.log_fro, ref.log_fro + p * std::numbers::ln2, 1e-12);
    expect_rel(m.fro, std::ldexp(ref.fro, p), 1e-13, "fro");
    expect_rel(m.s1, std::ldexp(ref.s1, p), 1e-13, "s1");
    expect_rel(m.mu, std::ldexp(ref.mu, p), 1e-13, "mu");
  }
  // log_scale = 5000: the true norm exceeds the double range; log_fro carries it.
  const SignalMetrics big = signal_metrics(x, 5000.0);
  expect_bitwise_same_shape(big, ref);
  EXPECT_NEAR(big.log_fro, ref.log_fro + 5000.0, 1e-12);
  EXPECT_EQ(big.fro, inf);
  EXPECT_EQ(big.s1, inf);
  // log_scale = -5000: the true values underflow to zero, the shape metrics are untouched.
  const SignalMetrics small = signal_metrics(x, -5000.0);
  expect_bitwise_same_shape(small, ref);
  EXPECT_NEAR(small.log_fro, ref.log_fro - 5000.0, 1e-12);
  EXPECT_EQ(small.fro, 0.0);
}

TEST(MetricsSignal, RepresentableValuesAreFiniteWhenFroOverflows) {
  // X = b [[1, 1], [1, -1]], b = 2^1023: ||X||_F = 2b = 2^1024 overflows, but
  // s1 = s2 = sqrt(2) b and mu = ||[[0, b], [0, -b]]||_F = sqrt(2) b are representable.
  const double big = std::ldexp(1.0, 1023);
  Matrix x(2, 2, big);
  x(1, 1) = -big;
  const SignalMetrics m = signal_metrics(x, 0.0);
  EXPECT_EQ(m.fro, inf);
  EXPECT_NEAR(m.log_fro, 1024 * std::numbers::ln2, 1e-12);
  expect_rel(m.s1, std::numbers::sqrt2 * big, 1e-13, "s1");
  expect_rel(m.s2, std::numbers::sqrt2 * big, 1e-13, "s2");
  expect_rel(m.mu, std::numbers::sqrt2 * big, 1e-13, "mu");
  EXPECT_NEAR(m.sr_cov, 2.0, 1e-13);
  // Same through log_scale: fro = sqrt(2) e^L overflows, s1 = e^L does not.
  const double l = std::log(std::numeric_limits<double>::max()) - 0.1;
  const SignalMetrics n = signal_metrics(Matrix::identity(2), l);
  EXPECT_EQ(n.fro, inf);
  EXPECT_TRUE(std::isfinite(n.s1));
  expect_rel(n.s1, std::exp(l), 1e-13, "s1 via log_scale");
}

TEST(MetricsSignal, ZeroMatrixGivesNaNAndMinusInfLog) {
  std::vector<double> spectrum;
  const SignalMetrics m = signal_metrics(Matrix(4, 6), 1.5, &spectrum);
  EXPECT_EQ(m.fro, 0.0);
  EXPECT_EQ(m.log_fro, -inf);
  expect_all_nan_shape(m);
  ASSERT_EQ(spectrum.size(), 4u);
  for (double s : spectrum) EXPECT_TRUE(std::isnan(s));
}

TEST(MetricsSignal, NonFiniteInputGivesNaN) {
  for (double bad : {inf, -inf, std::numeric_limits<double>::quiet_NaN()}) {
    Matrix x = random_matrix(3, 4, 71);
    x(1, 2) = bad;
    const SignalMetrics m = signal_metrics(x, 0.0);
    EXPECT_TRUE(std::isnan(m.fro));
    EXPECT_TRUE(std::isnan(m.log_fro));
    expect_all_nan_shape(m);
  }
}

// finite_max_abs: max |x| against a naive loop, on matrices of one pass part and of several (from
// 2^20 entries, 256-row parts), on 1 and 2 threads; NaN as soon as one entry, anywhere (first,
// last, in a later part, in a row's tail), is NaN, inf or -inf. signal_metrics given that maximum
// returns bitwise what it finds alone.
TEST(MetricsSignal, FiniteMaxAbsFindsTheMaximumAndEveryNonFiniteEntry) {
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{3, 5}, {1024, 1027}}) {
    Matrix x = random_matrix(rows, cols, 81);
    x(rows - 1, cols - 2) = -7.5;  // the largest |x|, in the last part
    double naive = 0.0;
    for (double v : x.values()) naive = std::max(naive, std::abs(v));
    for (int threads : {1, 2}) {
      parallel::set_threads(threads);
      EXPECT_EQ(finite_max_abs(x), naive) << rows << " x " << cols << ", " << threads << " threads";
      for (double bad : {inf, -inf, std::numeric_limits<double>::quiet_NaN()})
        for (const auto& [i, j] :
             {std::pair<std::size_t, std::size_t>{0, 0}, {rows - 1, cols - 1}, {rows / 2, cols - 1}, {rows - 1, 1}}) {
          Matrix y = x;
          y(i, j) = bad;
          EXPECT_TRUE(std::isnan(finite_max_abs(y))) << bad << " at " << i << ", " << j;
        }
      parallel::set_threads(1);
    }
    const SignalMetrics alone = signal_metrics(x, 0.25), given = signal_metrics(x, 0.25, nullptr, naive);
    const auto a = to_row(alone, {}), g = to_row(given, {});
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (!std::isnan(a[k])) {
        EXPECT_EQ(a[k], g[k]) << "metric " << k;
      }
    }
  }
}

// signal_metrics uses X in place (the scale 2^-e applied on the fly, dsyrk's alpha for the Gram
// matrix) while max |x| is within 2^[-400, 400], and a scaled copy outside. Both routes, on both
// sides of the boundaries, against the reference computed from an explicit unit-norm copy Xu
// (spectral_summary of Xu; the naive centring of Xu), for random, collapsed (SVD fallback) and
// identical-row inputs.
TEST(MetricsSignal, InPlaceAndCopyRoutesAgree) {
  std::vector<Matrix> inputs;
  for (auto [t, d] : {std::pair<std::size_t, std::size_t>{20, 100}, {30, 30}, {50, 20}, {3, 17}})
    inputs.push_back(random_matrix(t, d, static_cast<unsigned>(t * 1000 + d)));
  {  // collapsed: rank 1 plus 1e-7 noise (s_2 / s_1 ~ 1e-7: the SVD route)
    const Matrix u = random_matrix(24, 1, 81), v = random_matrix(1, 60, 82), noise = random_matrix(24, 60, 83);
    Matrix x = linalg::matmul(u, v);
    for (std::size_t i = 0; i < x.size(); ++i) x.values()[i] += 1e-7 * noise.values()[i];
    inputs.push_back(x);
  }
  {  // identical rows: mu = res_rel = 0 exactly
    const Matrix v = random_matrix(1, 40, 84);
    Matrix x(12, 40);
    for (std::size_t i = 0; i < 12; ++i)
      for (std::size_t j = 0; j < 40; ++j) x(i, j) = v(0, j);
    inputs.push_back(x);
  }
  for (std::size_t n = 0; n < inputs.size(); ++n) {
    const Matrix& x0 = inputs[n];
    // Reference: unit-norm copy, as the metrics are defined.
    double ss = 0.0;
    for (double v : x0.values()) ss += v * v;
    const double fro = std::sqrt(ss);
    const Matrix xu = scaled(x0, 1.0 / fro);
    const SpectralSummary sv = spectral_summary(xu, false);
    const SignalMetrics naive = naive_signal(xu, 0.0);
    for (int p : {-1000, -600, -402, -401, -400, -399, 0, 398, 399, 400, 401, 600, 1000}) {
      const Matrix x = scaled(x0, std::ldexp(1.0, p));
      SCOPED_TRACE(testing::Message() << "input " << n << " p " << p);
      const SignalMetrics m = signal_metrics(x, 0.0);
      expect_rel(m.fro, std::ldexp(fro, p), 1e-13, "fro");
      EXPECT_NEAR(m.log_fro, std::log(fro) + p * std::numbers::ln2, 1e-13 * std::max(1.0, std::abs(m.log_fro)));
      expect_rel(m.s1, std::ldexp(sv.s1 * fro, p), 1e-13, "s1");
      // s_2 of a collapsed X has absolute accuracy eps s_1 only (any route)
      EXPECT_NEAR(m.s2, std::ldexp(sv.s2 * fro, p), 1e-13 * m.s1);
      expect_rel(m.sr_cov, sv.sum4, 1e-13, "sr_cov");
      expect_rel(m.sr_x, sv.sum2, 1e-13, "sr_x");
      EXPECT_NEAR(m.mu_rel, naive.mu_rel, 1e-13);
      EXPECT_NEAR(m.res_rel, naive.res_rel, 1e-13);
      expect_rel(m.mu, std::ldexp(m.mu_rel * fro, p), 1e-13, "mu");
      if (n + 1 == inputs.size()) {
        EXPECT_EQ(m.mu, 0.0);
        EXPECT_EQ(m.res_rel, 0.0);
      }
    }
  }
}

TEST(MetricsSignal, NaNAmongZerosOrHugeValuesGivesNaN) {
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  for (double fill : {0.0, 1.0, std::ldexp(1.0, 1000), std::ldexp(1.0, -1060)}) {
    for (std::size_t at : {std::size_t{0}, std::size_t{5}, std::size_t{11}}) {
      Matrix x(3, 4, fill);
      x(1, 0) = 2.0 * fill;
      x.values()[at] = qnan;
      const SignalMetrics m = signal_metrics(x, 0.0);
      SCOPED_TRACE(testing::Message() << fill << " at " << at);
      EXPECT_TRUE(std::isnan(m.fro));
      EXPECT_TRUE(std::isnan(m.log_fro));
      expect_all_nan_shape(m);
      const MixerMetrics mm = mixer_metrics(x);
      EXPECT_TRUE(std::isnan(mm.m_fro));
      EXPECT_TRUE(std::isnan(mm.m_s1));
    }
  }
}

TEST(MetricsNorm, OneInfAgainstNaiveAndHandCase) {
  Matrix a(2, 2);
  a(0, 0) = 1;
  a(0, 1) = -2;
  a(1, 0) = 3;
  a(1, 1) = 4;
  EXPECT_NEAR(norm_1_inf(a), std::sqrt(6.0 * 7.0), 1e-15);  // max col sum 6, max row sum 7
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{3, 8}, {8, 3}, {1, 1}}) {
    const Matrix x = random_matrix(m, n, static_cast<unsigned>(m * 10 + n));
    expect_rel(norm_1_inf(x), naive_norm_1_inf(x), 1e-14, "norm_1_inf");
  }
}

TEST(MetricsMixer, Identity) {
  const std::size_t t = 7;
  const MixerMetrics m = mixer_metrics(Matrix::identity(t));
  EXPECT_NEAR(m.m_s1, 1.0, 1e-14);
  EXPECT_NEAR(m.m_s2, 1.0, 1e-14);
  EXPECT_NEAR(m.m_gap, 1.0, 1e-14);
  EXPECT_NEAR(m.m_fro, std::sqrt(static_cast<double>(t)), 1e-14);
}

TEST(MetricsMixer, UniformIsRankOne) {
  const std::size_t t = 6;
  const MixerMetrics m = mixer_metrics(Matrix(t, t, 1.0 / static_cast<double>(t)));
  EXPECT_NEAR(m.m_s1, 1.0, 1e-14);
  EXPECT_NEAR(m.m_s2, 0.0, 1e-14);
  EXPECT_GT(m.m_gap, 1e13);
  EXPECT_NEAR(m.m_fro, 1.0, 1e-14);
}

TEST(MetricsMixer, RowStochasticHasTopSingularValueAtLeastOne) {
  for (unsigned seed : {81u, 82u, 83u}) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(0.0, 1.0);
    Matrix m(8, 8);
    for (std::size_t i = 0; i < 8; ++i) {
      double s = 0.0;
      for (std::size_t j = 0; j < 8; ++j) s += (m(i, j) = dist(gen));
      for (std::size_t j = 0; j < 8; ++j) m(i, j) /= s;
    }
    const MixerMetrics mm = mixer_metrics(m);
    EXPECT_GE(mm.m_s1, 1.0 - 1e-14);  // M 1 = 1, so s_1 >= ||M 1|| / ||1|| = 1
    const auto sv = linalg::singular_values(m);
    EXPECT_NEAR(mm.m_s1, sv[0], 1e-12 * sv[0]);  // Gram route: exact to 1e-12 relative
    EXPECT_NEAR(mm.m_s2, sv[1], 1e-12 * sv[1]);
    EXPECT_NEAR(mm.m_gap, sv[0] / sv[1], 1e-11 * sv[0] / sv[1]);
    double ss = 0.0;
    for (double x : m.values()) ss += x * x;
    EXPECT_NEAR(mm.m_fro, std::sqrt(ss), 1e-14);
  }
}

// m_fro: one unscaled pass while max |m| is within 2^[-400, 400], the scaled two-pass norm
// outside; both against the naive norm.
TEST(MetricsMixer, FrobeniusNormAtAllScales) {
  const Matrix m0 = random_matrix(9, 9, 91);
  double ss = 0.0;
  for (double v : m0.values()) ss += v * v;
  for (int p : {-1060, -1000, -401, -400, 0, 400, 401, 1000, 1020}) {
    const MixerMetrics m = mixer_metrics(scaled(m0, std::ldexp(1.0, p)));
    SCOPED_TRACE(p);
    expect_rel(m.m_fro, std::ldexp(std::sqrt(ss), p), 1e-13, "m_fro");
  }
}

// From T = mixer_lanczos_min_order on, s_1 and s_2 come from Golub–Kahan–Lanczos: the same values
// as the SVD to 1e-12 relative, for attention mixers from nearly uniform (collapsed, s_2 / s_1 ~
// 1e-3) to sharp, with and without perp, at extreme scales, and for the identity (s_1 = s_2).
TEST(MetricsMixer, LargeMixersByLanczosMatchTheSvd) {
  for (std::size_t t : {mixer_lanczos_min_order, std::size_t{300}})
    for (double logit_sd : {0.003, 0.3, 3.0})
      for (bool perp : {false, true})
        for (int p : {0, -300, 300}) {
          Matrix m = random_matrix(t, t, static_cast<unsigned>(t + 7));
          for (std::size_t i = 0; i < t; ++i) {
            double sum = 0.0;
            for (std::size_t j = 0; j < t; ++j) sum += m(i, j) = std::exp(logit_sd * m(i, j));
            for (std::size_t j = 0; j < t; ++j) m(i, j) = m(i, j) / sum - (perp ? 1.0 / static_cast<double>(t) : 0.0);
          }
          m = scaled(m, std::ldexp(1.0, p));
          const auto sv = linalg::singular_values(m);
          const MixerMetrics mm = mixer_metrics(m);
          SCOPED_TRACE(testing::Message() << "T " << t << " sd " << logit_sd << " perp " << perp << " 2^" << p);
          expect_rel(mm.m_s1, sv[0], 1e-12, "m_s1");
          // s_2 of a nearly rank-one matrix is known to ~eps s_1 only (for the SVD too)
          EXPECT_NEAR(mm.m_s2, sv[1], 1e-12 * sv[1] + 1e-14 * sv[0]);
          if (!perp && p == 0) {
            EXPECT_GE(mm.m_s1, 1.0 - 1e-14);
          }
        }
  const MixerMetrics id = mixer_metrics(Matrix::identity(200));
  EXPECT_NEAR(id.m_s1, 1.0, 1e-14);
  EXPECT_NEAR(id.m_s2, 1.0, 1e-14);
  const MixerMetrics uniform = mixer_metrics(Matrix(200, 200, 1.0 / 200.0));
  EXPECT_NEAR(uniform.m_s1, 1.0, 1e-14);
  EXPECT_NEAR(uniform.m_s2, 0.0, 1e-14);
}

TEST(MetricsMixer, SingleTokenHasZeroSecondValue) {
  const MixerMetrics m = mixer_metrics(Matrix(1, 1, 0.5));
  EXPECT_EQ(m.m_s1, 0.5);
  EXPECT_EQ(m.m_s2, 0.0);
  EXPECT_EQ(m.m_gap, inf);
  EXPECT_EQ(m.m_fro, 0.5);
}

TEST(MetricsRow, FollowsLayerMetricNames) {
  SignalMetrics x;
  x.fro = 1;
  x.log_fro = 2;
  x.s1 = 3;
  x.s2 = 4;
  x.sr_cov = 5;
  x.sr_x = 6;
  x.mu = 7;
  x.mu_rel = 8;
  x.res_rel = 9;
  x.res_best = 14;
  MixerMetrics m;
  m.m_s1 = 10;
  m.m_s2 = 11;
  m.m_gap = 12;
  m.m_fro = 13;
  const auto row = to_row(x, m);
  auto at = [&](std::string_view name) {
    const auto it = std::find(layer_metric_names.begin(), layer_metric_names.end(), name);
    EXPECT_NE(it, layer_metric_names.end()) << name;
    return row[static_cast<std::size_t>(it - layer_metric_names.begin())];
  };
  EXPECT_EQ(at("fro"), x.fro);
  EXPECT_EQ(at("log_fro"), x.log_fro);
  EXPECT_EQ(at("s1"), x.s1);
  EXPECT_EQ(at("s2"), x.s2);
  EXPECT_EQ(at("sr_cov"), x.sr_cov);
  EXPECT_EQ(at("sr_x"), x.sr_x);
  EXPECT_EQ(at("mu"), x.mu);
  EXPECT_EQ(at("mu_rel"), x.mu_rel);
  EXPECT_EQ(at("res_rel"), x.res_rel);
  EXPECT_EQ(at("m_s1"), m.m_s1);
  EXPECT_EQ(at("m_s2"), m.m_s2);
  EXPECT_EQ(at("m_gap"), m.m_gap);
  EXPECT_EQ(at("m_fro"), m.m_fro);
  EXPECT_EQ(at("res_best"), x.res_best);
}

// The Gram route of spectral_summary against the SVD route, for matrices with prescribed singular
// values U diag(s) V^T: s_2 / s_1 from 1 down to 1e-9, shapes wide, tall and square. Where the
// Gram route is taken, s1, s2, sum2 and sum4 agree with the SVD to 1e-12 relative; below the
// threshold (a collapsed spectrum) the Lanczos route is taken: s1, sum2, sum4 to 1e-12 relative
// and s2 to 1e-12 relative or a few eps s1, the accuracy to which the SVD itself knows it.
// U diag(s) V^T (m x n) with random orthonormal U, V and s_1 = 1, s_j = ratio 0.97^(j-1).
Matrix prescribed_spectrum(int m, int n, double ratio, std::mt19937_64& gen) {
  std::normal_distribution<double> nd;
  const std::size_t k = static_cast<std::size_t>(std::min(m, n));
  Matrix G1(m, k), G2(n, k);
  for (double& x : G1.values()) x = nd(gen);
  for (double& x : G2.values()) x = nd(gen);
  Matrix US = linalg::thin_q(G1);
  const Matrix V = linalg::thin_q(G2);
  for (std::size_t i = 0; i < static_cast<std::size_t>(m); ++i)
    for (std::size_t j = 1; j < k; ++j) US(i, j) *= ratio * std::pow(0.97, static_cast<double>(j));
  return linalg::matmul(US, V, linalg::Op::none, linalg::Op::trans);
}

TEST(MetricsSpectral, GramRouteIsExactWhereTakenAndLanczosWhenCollapsed) {
  std::mt19937_64 gen(123);
  double worst = 0.0;
  int gram = 0, lanczos = 0;
  const double eps = std::numeric_limits<double>::epsilon();
  for (auto [m, n] : {std::pair{40, 90}, std::pair{90, 40}, std::pair{60, 60}}) {
    for (double ratio : {1.0, 0.5, 0.1, 0.05, 0.0316, 0.03, 0.01, 1e-3, 1e-6, 1e-9}) {
      const Matrix A = prescribed_spectrum(m, n, ratio, gen);
      const SpectralSummary fast = spectral_summary(A, false), full = spectral_summary(A, true);
      ASSERT_EQ(full.route, SpectralSummary::Route::svd);
      const bool expect_gram = ratio * ratio * 0.97 * 0.97 >= gram_threshold * 1.01;
      const bool expect_collapsed = ratio * ratio * 0.97 * 0.97 < gram_threshold * 0.99;
      if (expect_gram) {
        EXPECT_EQ(fast.route, SpectralSummary::Route::gram) << ratio;
      }
      if (expect_collapsed) {
        EXPECT_EQ(fast.route, SpectralSummary::Route::lanczos) << ratio;
      }
      (fast.route == SpectralSummary::Route::gram ? gram : lanczos)++;
      SCOPED_TRACE(testing::Message() << m << "x" << n << " ratio " << ratio);
      for (auto [a, b] :
           {std::pair{fast.s1, full.s1}, std::pair{fast.sum2, full.sum2}, std::pair{fast.sum4, full.sum4}}) {
        worst = std::max(worst, std::abs(a - b) / std::abs(b));
        EXPECT_NEAR(a, b, 1e-12 * std::abs(b));
      }
      EXPECT_NEAR(fast.s2, full.s2, 1e-12 * full.s2 + 32 * eps * full.s1);
    }
  }
  EXPECT_GT(gram, 0);
  EXPECT_GT(lanczos, 0);
  std::printf("worst relative difference of s1, sum2, sum4, fast vs SVD route: %.3g\n", worst);
}


// [output] metrics: a selection skips parts of signal_metrics. What is computed equals the full
// computation (bitwise where the route is the same: ||X||_F and the centred pass; s_1 and the sums
// from lambda_1 to 1e-13, as without s_2 a collapsed signal takes another route than Lanczos on
// X), what is skipped is NaN.
TEST(MetricsSignal, SelectedPartsMatchTheFullComputation) {
  std::mt19937_64 gen(99);
  std::normal_distribution<double> nd;
  std::vector<Matrix> signals;
  for (auto [t, d] : {std::pair<std::size_t, std::size_t>{12, 30}, {30, 12}, {40, 40}, {1, 5}})
    signals.push_back(random_matrix(t, d, static_cast<unsigned>(t * 100 + d)));
  // u v^T + 1e-7 noise: s_2 / s_1 ~ 1e-7, the Lanczos route of the full computation; without s_2
  // the tridiagonalisation (order 20) or linalg::top_eigenvalue_psd (order 40)
  for (auto [t, d] : {std::pair<std::size_t, std::size_t>{20, 50}, {40, 90}}) {
    Matrix collapsed(t, d);
    std::vector<double> u(t), v(d);
    for (double& x : u) x = nd(gen);
    for (double& x : v) x = nd(gen);
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < d; ++j) collapsed(i, j) = u[i] * v[j] + 1e-7 * nd(gen);
    signals.push_back(collapsed);
  }
  int checked = 0;
  for (const Matrix& x : signals)
    for (int mask = 0; mask < 8; ++mask) {
      const SignalNeeds needs{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
      SCOPED_TRACE(testing::Message() << x.rows() << "x" << x.cols() << " top " << needs.top << " second "
                                      << needs.second << " centred " << needs.centred);
      const SignalMetrics full = signal_metrics(x, 0.7), part = signal_metrics(x, 0.7, nullptr, -1.0, needs);
      EXPECT_EQ(part.fro, full.fro);
      EXPECT_EQ(part.log_fro, full.log_fro);
      if (needs.top || needs.second) {
        // lambda_1 to 1e-13 by either route: s_1 = sqrt, sr_x ~ 1 / lambda_1, sr_cov ~ 1 / lambda_1^2
        expect_rel(part.s1, full.s1, 1e-13, "s1");
        expect_rel(part.sr_cov, full.sr_cov, 2.5e-13, "sr_cov");
        expect_rel(part.sr_x, full.sr_x, 1.5e-13, "sr_x");
      } else {
        EXPECT_TRUE(std::isnan(part.s1) && std::isnan(part.sr_cov) && std::isnan(part.sr_x));
      }
      if (needs.second)
        EXPECT_EQ(part.s2, full.s2);  // the same route as the full computation
      else
        EXPECT_TRUE(std::isnan(part.s2));
      if (needs.centred) {
        EXPECT_EQ(part.mu, full.mu);
        EXPECT_EQ(part.mu_rel, full.mu_rel);
        EXPECT_EQ(part.res_rel, full.res_rel);
      } else {
        EXPECT_TRUE(std::isnan(part.mu) && std::isnan(part.mu_rel) && std::isnan(part.res_rel));
      }
      ++checked;
    }
  EXPECT_EQ(checked, 48);
}

// Which parts each metric needs: s2 needs s_1 too, m_gap needs both of the mixer's values.
TEST(MetricsSelection, NeedsFollowTheSelectedNames) {
  const auto set = [](std::initializer_list<std::string_view> names) {
    MetricSet s;
    for (auto n : names) s.set(metric_index(n));
    return s;
  };
  const auto sig = [](const SignalNeeds& n) { return std::tuple{n.top, n.second, n.centred, n.best_residual}; };
  const auto mix = [](const MixerNeeds& n) { return std::pair{n.top, n.second}; };
  EXPECT_EQ(sig(signal_needs(all_metrics())), std::tuple(true, true, true, true));
  EXPECT_EQ(sig(signal_needs(default_metrics())), std::tuple(true, true, true, false));  // res_best is opt-in
  EXPECT_EQ(sig(signal_needs(always_computed())), std::tuple(false, false, false, false));
  EXPECT_EQ(sig(signal_needs(set({"sr_cov"}))), std::tuple(true, false, false, false));
  EXPECT_EQ(sig(signal_needs(set({"s2"}))), std::tuple(true, true, false, false));
  EXPECT_EQ(sig(signal_needs(set({"res_rel"}))), std::tuple(false, false, true, false));
  EXPECT_EQ(sig(signal_needs(set({"res_best"}))), std::tuple(false, false, false, true));
  EXPECT_EQ(mix(mixer_needs(set({"m_fro", "sr_x"}))), std::pair(false, false));
  EXPECT_EQ(mix(mixer_needs(set({"m_s1"}))), std::pair(true, false));
  EXPECT_EQ(mix(mixer_needs(set({"m_gap"}))), std::pair(true, true));
  EXPECT_EQ(mix(mixer_needs(set({"m_s2"}))), std::pair(true, true));
}

// The registry (metrics/registry.hpp): every entry a dataset name, a description and units; the
// names and selections read from it; each metric's part is the work a selection of it alone needs.
TEST(MetricRegistry, EntriesAreCompleteAndNamesUnique) {
  ASSERT_EQ(layer_metric_names.size(), layer_metrics.size());
  for (std::size_t i = 0; i < n_layer_metrics; ++i) {
    const MetricInfo& m = layer_metrics[i];
    SCOPED_TRACE(std::string(m.name));
    EXPECT_EQ(layer_metric_names[i], m.name);
    EXPECT_EQ(metric_index(m.name), i);  // unique
    EXPECT_FALSE(m.name.empty());
    EXPECT_TRUE(std::all_of(m.name.begin(), m.name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    }));  // an HDF5 dataset name, a Python identifier, a word of [output] metrics
    EXPECT_FALSE(m.description.empty());
    EXPECT_TRUE(m.units == "X" || m.units == "ln X" || m.units == "1") << m.units;
  }
  EXPECT_EQ(metric_index("no_such_metric"), n_layer_metrics);
}

TEST(MetricRegistry, EveryPartHasItsCost) {
  for (const Part part : {Part::signal_norm, Part::signal_top, Part::signal_second, Part::signal_centred,
                          Part::mixer_norm, Part::mixer_top, Part::mixer_second, Part::signal_best_residual}) {
    EXPECT_EQ(cost_of(part).part, part);
    EXPECT_FALSE(cost_of(part).work.empty());
    EXPECT_FALSE(cost_of(part).priced_by.empty());
  }
}

TEST(MetricRegistry, AMetricAloneNeedsItsPart) {
  const auto sig = [](const SignalNeeds& n) { return std::tuple{n.top, n.second, n.centred, n.best_residual}; };
  const auto mix = [](const MixerNeeds& n) { return std::pair{n.top, n.second}; };
  for (std::size_t i = 0; i < n_layer_metrics; ++i) {
    const Part part = layer_metrics[i].needs;
    SCOPED_TRACE(std::string(layer_metrics[i].name));
    const MetricSet alone = MetricSet().set(i);
    EXPECT_EQ(sig(signal_needs(alone)),
              std::tuple(part == Part::signal_top || part == Part::signal_second, part == Part::signal_second,
                         part == Part::signal_centred, part == Part::signal_best_residual));
    EXPECT_EQ(mix(mixer_needs(alone)),
              std::pair(part == Part::mixer_top || part == Part::mixer_second, part == Part::mixer_second));
    EXPECT_EQ(always_computed()[i], part == Part::signal_norm);
    EXPECT_TRUE(metrics_of(part)[i]);
  }
  EXPECT_EQ(names_of(always_computed()), "fro log_fro");
}

// The default selection (also "all" of [output] metrics) is every metric but the opt-in ones: the
// core metrics, so that a default sweep computes what it did before a metric was added.
TEST(MetricRegistry, DefaultSelectionLeavesOutTheOptInMetrics) {
  for (std::size_t i = 0; i < n_layer_metrics; ++i) {
    SCOPED_TRACE(std::string(layer_metrics[i].name));
    EXPECT_EQ(default_metrics()[i], !layer_metrics[i].opt_in);
    if (i < n_core_metrics) {
      EXPECT_FALSE(layer_metrics[i].opt_in);
    }
  }
  EXPECT_TRUE(layer_metrics[metric_index("res_best")].opt_in);
  EXPECT_EQ(layer_metrics[metric_index("res_best")].needs, Part::signal_best_residual);
}

TEST(MetricsMixer, SelectedPartsMatchTheFullComputation) {
  for (std::size_t T : {std::size_t{24}, std::size_t{300}}) {  // the Gram route and the Lanczos route
    Matrix M = random_matrix(T, T, static_cast<unsigned>(T));
    for (double& x : M.values()) x = std::abs(x);
    const MixerMetrics full = mixer_metrics(M);
    const MixerMetrics none = mixer_metrics(M, nullptr, {false, false});
    const MixerMetrics top = mixer_metrics(M, nullptr, {true, false});
    SCOPED_TRACE(testing::Message() << "T = " << T);
    EXPECT_EQ(none.m_fro, full.m_fro);
    EXPECT_TRUE(std::isnan(none.m_s1) && std::isnan(none.m_s2) && std::isnan(none.m_gap));
    EXPECT_EQ(top.m_fro, full.m_fro);
    expect_rel(top.m_s1, full.m_s1, 1e-13, "m_s1");
  }
}

TEST(MetricsRow, MetricsNotSelectedAreNaN) {
  SignalMetrics x{1, 2, 3, 4, 5, 6, 7, 8, 9};
  const MixerMetrics m{10, 11, 12, 13};
  MetricSet selected;
  selected.set(metric_index("sr_cov")).set(metric_index("m_gap"));
  const LayerRow row = to_row(x, m, selected);
  for (std::size_t i = 0; i < n_layer_metrics; ++i) {
    const std::string_view name = layer_metric_names[i];
    if (name == "fro" || name == "log_fro" || name == "sr_cov" || name == "m_gap")
      EXPECT_EQ(row[i], to_row(x, m)[i]) << name;  // fro and log_fro always
    else
      EXPECT_TRUE(std::isnan(row[i])) << name;
  }
}

// Without s_2 the Gram route serves every spectrum, collapsed ones too: s_1 and the sums to 1e-12
// of the SVD's at s_2 / s_1 down to 1e-9, s_2 NaN; lambda_1 as the two-value route's to 1e-13.
TEST(MetricsSpectral, WithoutSecondTheGramRouteServesEverySpectrum) {
  std::mt19937_64 gen(321);
  for (auto [m, n] : {std::pair{40, 90}, std::pair{90, 40}}) {
    for (double ratio : {1.0, 0.1, 1e-3, 1e-6, 1e-9}) {
      const Matrix A = prescribed_spectrum(m, n, ratio, gen);
      const SpectralSummary top = spectral_summary(A, false, false), full = spectral_summary(A, true);
      SCOPED_TRACE(testing::Message() << m << "x" << n << " ratio " << ratio);
      EXPECT_EQ(top.route, SpectralSummary::Route::gram);
      EXPECT_NEAR(top.s1, full.s1, 1e-12 * full.s1);
      EXPECT_NEAR(top.sum2, full.sum2, 1e-12 * full.sum2);
      EXPECT_NEAR(top.sum4, full.sum4, 1e-12 * full.sum4);
      EXPECT_TRUE(std::isnan(top.s2));
      const linalg::GramTop one = linalg::gram_top(A, 1.0, 0.0, false), two = linalg::gram_top(A);
      EXPECT_NEAR(one.lambda1, two.lambda1, 1e-13 * two.lambda1);  // the PSD Lanczos route where collapsed
      EXPECT_TRUE(std::isnan(one.lambda2));
    }
  }
}

}  // namespace
}  // namespace rcsweep::metrics
