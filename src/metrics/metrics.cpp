#include "metrics/metrics.hpp"

#include "base/error.hpp"
#include "base/pow2.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "linalg/linalg.hpp"

namespace rcsweep::metrics {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

bool all_finite(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Euclidean norm of values known to be O(1) (|x| <= 4 here): one pass, no scaling needed.
double norm_of_bounded(std::span<const double> v) {
  double ss = 0.0;
  for (double x : v) ss += x * x;
  return std::sqrt(ss);
}

// Euclidean norm of finite values without overflow or harmful underflow: scale by an exact power
// of two so the largest magnitude is in [0.5, 1), sum squares, scale back (two-pass dnrm2).
double robust_norm(std::span<const double> v) {
  double amax = 0.0;
  for (double x : v) amax = std::max(amax, std::abs(x));
  if (amax == 0.0 || !std::isfinite(amax)) return amax;
  int e = 0;
  std::frexp(amax, &e);
  // Scale in blocks by 2^-e (exact) and sum squares: no libm call per element.
  double ss = 0.0, block[256];
  for (std::size_t i = 0; i < v.size(); i += 256) {
    const std::size_t n = std::min<std::size_t>(256, v.size() - i);
    scale_pow2(v.subspan(i, n), std::span<double>(block, n), -e);
    for (std::size_t j = 0; j < n; ++j) ss += block[j] * block[j];
  }
  return std::ldexp(std::sqrt(ss), e);
}

// X - 1 xbar^T with xbar the row (token) mean. The mean is taken of differences to row 0
// (shifted-data algorithm): more accurate, and exactly 0 when all rows are equal.
Matrix centre_rows(const Matrix& X) {
  const std::size_t T = X.rows();
  const std::size_t d = X.cols();
  Matrix C(T, d);
  if (T == 0) return C;
  std::vector<double> shift(d, 0.0);
  for (std::size_t i = 1; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) shift[j] += X(i, j) - X(0, j);
  const double inv_t = 1.0 / static_cast<double>(T);
  for (std::size_t j = 0; j < d; ++j) shift[j] *= inv_t;
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) C(i, j) = (X(i, j) - X(0, j)) - shift[j];
  return C;
}

}  // namespace

double norm_1_inf(const Matrix& A) {
  const std::size_t m = A.rows();
  const std::size_t n = A.cols();
  if (m == 0 || n == 0) return 0.0;
  std::vector<double> col(n, 0.0);
  double max_row = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    double r = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      const double a = std::abs(A(i, j));
      r += a;
      col[j] += a;
    }
    max_row = std::max(max_row, r);
  }
  const double max_col = *std::max_element(col.begin(), col.end());
  // sqrt of each factor: the product itself could overflow.
  return std::sqrt(max_col) * std::sqrt(max_row);
}

SpectralSummary spectral_summary(const Matrix& A, bool want_all) {
  SpectralSummary r;
  const std::size_t k = std::min(A.rows(), A.cols());
  if (k == 0) return r;
  // Cheapest exact route (measured in bench/, tested against the SVD route): the eigenvalues of
  // the Gram matrix give s_i^2 with absolute error ~ eps s_1^2, which is below 1e-12 relative
  // for s_1, for sum s^4 and for s_2 while s_2^2 >= gram_threshold s_1^2. Below that (a collapsed
  // signal) or when the whole spectrum is wanted, a singular-value decomposition is used.
  if (!want_all) {
    linalg::GramTop g;
    try {
      g = linalg::gram_top(A);
    } catch (const LinalgError&) {  // the eigensolver did not converge: the SVD decides
      g.lambda1 = 0.0;
    }
    if (g.lambda1 > 0.0 && (k < 2 || g.lambda2 >= gram_threshold * g.lambda1)) {
      r.s1 = std::sqrt(g.lambda1);
      r.s2 = std::sqrt(g.lambda2);
      r.sum2 = g.trace / g.lambda1;
      r.sum4 = g.fro2 / (g.lambda1 * g.lambda1);
      r.route = SpectralSummary::Route::gram;
      return r;
    }
  }
  r.sv = linalg::singular_values(A);
  r.s1 = r.sv[0];
  r.s2 = k >= 2 ? r.sv[1] : 0.0;
  for (double s : r.sv) {
    const double ratio2 = (s / r.s1) * (s / r.s1);
    r.sum2 += ratio2;
    r.sum4 += ratio2 * ratio2;
  }
  r.route = SpectralSummary::Route::svd;
  return r;
}

SignalMetrics signal_metrics(const Matrix& X, double log_scale, std::vector<double>* spectrum) {
  SignalMetrics r;
  const std::size_t k = std::min(X.rows(), X.cols());
  if (spectrum) spectrum->assign(k, nan);
  if (!std::isfinite(log_scale) || !all_finite(X.values())) return r;

  // ||X||_F = nrm * 2^e without overflow: X * 2^-e has max |entry| in [0.5, 1) (exact, except
  // that entries below 2^-1022 relative to the largest become subnormal: negligible).
  double amax = 0.0;
  for (double x : X.values()) amax = std::max(amax, std::abs(x));
  if (amax == 0.0) {  // exact zero (or empty): the norm is known, the shape metrics are not
    r.fro = 0.0;
    r.log_fro = -inf;
    return r;
  }
  int e = 0;
  std::frexp(amax, &e);
  Matrix Xu(X.rows(), X.cols());
  scale_pow2(X.values(), Xu.values(), -e);
  const double nrm = norm_of_bounded(Xu.values());  // entries in (-1, 1): nrm in [0.5, sqrt(size))
  for (double& x : Xu.values()) x /= nrm;        // unit Frobenius norm

  // ln 2 = ln2_hi + ln2_lo (Cody–Waite split): e * ln2_hi and q * ln2_hi below are then exact
  // enough that log_fro and the reported scales keep ~1 ulp relative accuracy at any exponent.
  constexpr double ln2_hi = std::numbers::ln2;
  constexpr double ln2_lo = 2.319046813846299558e-17;  // ln 2 - ln2_hi
  const double de = static_cast<double>(e);
  r.log_fro = ((std::log(nrm) + de * ln2_lo) + de * ln2_hi) + log_scale;
  // exp(log_scale) = 2^q exp(rs), |rs| <= ln2 / 2 (q clamped: beyond it the result saturates).
  const double q = std::clamp(std::nearbyint(log_scale / ln2_hi), -1e6, 1e6);
  const double rs = std::fma(-q, ln2_lo, std::fma(-q, ln2_hi, log_scale));
  const double gain = std::exp(rs);
  const int shift = e + static_cast<int>(q);
  // rel * ||X||_F * exp(log_scale) = (rel * nrm * exp(rs)) * 2^(e + q): the mantissa part is in
  // [0, 1.5 sqrt(size)], so only the final exact ldexp can overflow or underflow, and the value
  // is finite whenever it is representable. With log_scale = 0 this is the exact rel * ||X||_F.
  auto at_scale = [&](double rel) { return std::ldexp(rel * nrm * gain, shift); };
  r.fro = at_scale(1.0);

  SpectralSummary sv = spectral_summary(Xu, spectrum != nullptr);
  r.s1 = at_scale(sv.s1);  // s1 >= 1/sqrt(k) > 0 for unit Frobenius norm
  r.s2 = at_scale(sv.s2);
  r.sr_cov = sv.sum4;  // Mind the Gap eq. (5): sum s_i^4 / s_1^4
  r.sr_x = sv.sum2;    // sum s_i^2 / s_1^2

  const Matrix C = centre_rows(Xu);
  r.mu_rel = norm_of_bounded(C.values());  // lambda-skip eq. (5), relative to ||X||_F = 1 (|C_ij| <= 2)
  r.mu = at_scale(r.mu_rel);
  r.res_rel = norm_1_inf(C) / norm_1_inf(Xu);  // Dong et al. §2
  if (spectrum) *spectrum = std::move(sv.sv);
  return r;
}

MixerMetrics mixer_metrics(const Matrix& M) {
  MixerMetrics r;
  if (M.empty() || !all_finite(M.values())) return r;
  const SpectralSummary sv = spectral_summary(M, false);
  r.m_s1 = sv.s1;
  r.m_s2 = sv.s2;
  r.m_gap = r.m_s1 / r.m_s2;  // huge for a rank-1 mixer (uniform: s_2 ~ 1e-17), +inf if s_2 == 0
  r.m_fro = robust_norm(M.values());
  return r;
}

std::array<double, n_layer_metrics> to_row(const SignalMetrics& x, const MixerMetrics& m) {
  return {x.fro, x.log_fro, x.s1, x.s2, x.sr_cov, x.sr_x, x.mu, x.mu_rel, x.res_rel,
          m.m_s1, m.m_s2, m.m_gap, m.m_fro};
}

}  // namespace rcsweep::metrics
