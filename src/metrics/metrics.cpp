#include "metrics/metrics.hpp"

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/pow2.hpp"
#include "base/sum.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <numbers>

#include "linalg/lanczos.hpp"
#include "linalg/linalg.hpp"
#include "metrics/best_residual.hpp"

namespace rcsweep::metrics {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

bool all_finite(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
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

// Largest |v_i|, NaN when some v_i is not finite: 4 independent maxima, and the sums of v_i - v_i
// (0 for a finite v_i, NaN else) in 4 more lanes; no early exit, so the loop vectorises.
double finite_max_abs(std::span<const double> v) {
  double m[4] = {0.0, 0.0, 0.0, 0.0}, z[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double a = std::abs(v[i + l]);
      m[l] = a > m[l] ? a : m[l];
      z[l] += v[i + l] - v[i + l];
    }
  for (; i < v.size(); ++i) {
    const double a = std::abs(v[i]);
    m[0] = a > m[0] ? a : m[0];
    z[0] += v[i] - v[i];
  }
  if ((z[0] + z[1]) + (z[2] + z[3]) != 0.0) return nan;
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Largest |v_i| and sum v_i^2 in one pass, with 4 independent lanes of each.
std::pair<double, double> max_and_squares(std::span<const double> v) {
  double m[4] = {0.0, 0.0, 0.0, 0.0}, ss[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double a = std::abs(v[i + l]);
      m[l] = a > m[l] ? a : m[l];
      ss[l] += a * a;
    }
  for (; i < v.size(); ++i) {
    const double a = std::abs(v[i]);
    m[0] = a > m[0] ? a : m[0];
    ss[0] += a * a;
  }
  return {std::max(std::max(m[0], m[1]), std::max(m[2], m[3])), (ss[0] + ss[1]) + (ss[2] + ss[3])};
}

// Rows of a rows x cols matrix in the parts the passes of the metrics sum over, fixed by the
// shape (the sums are bitwise the same on any number of threads): one part below 2^20 entries,
// which a pass reads in tens of microseconds, else parts of 256 rows, whose column sums are added
// in part order.
parallel::Parts pass_parts(std::size_t rows, std::size_t cols) {
  if (rows * cols < (std::size_t{1} << 20) || rows < 512) return {rows, std::max<std::size_t>(rows, 1)};
  return {rows, 256};
}

// The passes of signal_metrics over Y = X * f (f an exact power of two, applied on the fly so
// that no scaled copy is made), row by row. Per-column sums live in d-vectors (independent per
// column, so the compiler can vectorise them); the row sum uses 4 accumulators. Each returns the
// row's sum of |.|.

// Pass 1: col[j] += |y_ij|, sq[j] += y_ij^2, dif[j] += y_ij - y_0j.
double pass_moments(const double* x, const double* x0, double f, double* col, double* sq, double* dif, std::size_t d) {
  double r[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t j = 0;
  for (; j + 4 <= d; j += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double y = x[j + l] * f, a = std::abs(y);
      r[l] += a;
      col[j + l] += a;
      sq[j + l] += y * y;
      dif[j + l] += y - x0[j + l] * f;
    }
  for (; j < d; ++j) {
    const double y = x[j] * f, a = std::abs(y);
    r[0] += a;
    col[j] += a;
    sq[j] += y * y;
    dif[j] += y - x0[j] * f;
  }
  return (r[0] + r[1]) + (r[2] + r[3]);
}

// Pass 1 without the centred metrics: only sq[j] += y_ij^2, in the order of pass_moments (the
// same sum of squares, bitwise).
void pass_squares(const double* x, double f, double* sq, std::size_t d) {
  for (std::size_t j = 0; j < d; ++j) {
    const double y = x[j] * f;
    sq[j] += y * y;
  }
}

// Pass 2, the centred values c_ij = (y_ij - y_0j) - shift_j without materialising them:
// col[j] += |c_ij|, sq[j] += c_ij^2.
double pass_centred(const double* x, const double* x0, double f, const double* shift, double* col, double* sq,
                    std::size_t d) {
  double r[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t j = 0;
  for (; j + 4 <= d; j += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double c = (x[j + l] * f - x0[j + l] * f) - shift[j + l], a = std::abs(c);
      r[l] += a;
      col[j + l] += a;
      sq[j + l] += c * c;
    }
  for (; j < d; ++j) {
    const double c = (x[j] * f - x0[j] * f) - shift[j], a = std::abs(c);
    r[0] += a;
    col[j] += a;
    sq[j] += c * c;
  }
  return (r[0] + r[1]) + (r[2] + r[3]);
}

// Sums of X * f and of its token-centred version C = Y - 1 ybar^T, ybar the row (token) mean.
// The mean is taken of differences to row 0 (shifted-data algorithm): more accurate, and exactly
// 0 when all rows are equal. Entries of Y must be O(1) (|y| < 1 here).
struct SignalSums {
  double ss = 0.0, max_row = 0.0, max_col = 0.0;        // of Y: sum y^2, max row / column sum of |y|
  double c_ss = 0.0, c_max_row = 0.0, c_max_col = 0.0;  // the same of C
};

// Per-column sums over the rows of each part (`vectors` d-vectors per part, side by side), then
// added up in part order into part 0's: `pass(first, end, sums)` returns the parts' largest row
// sum. One part is the plain pass in row order.
double column_sums(const parallel::Parts& parts, std::size_t d, std::size_t vectors, std::vector<double>& work,
                   const std::function<double(std::size_t, std::size_t, double*)>& pass) {
  const std::size_t n = parts.count(), width = vectors * d;
  work.assign(std::max<std::size_t>(n, 1) * width, 0.0);  // part 0 holds the sums, also of no rows
  std::vector<double> max_row(n, 0.0);
  parallel::for_each(n, [&](std::size_t p) {
    max_row[p] = pass(parts.begin(p), parts.begin(p) + parts.length(p), work.data() + p * width);
  });
  for (std::size_t p = 1; p < n; ++p)
    for (std::size_t j = 0; j < width; ++j) work[j] += work[p * width + j];
  return n == 0 ? 0.0 : *std::max_element(max_row.begin(), max_row.end());
}

// Without `centred` only ss (the other fields stay 0).
SignalSums signal_sums(const Matrix& X, double f, bool centred) {
  const std::size_t T = X.rows(), d = X.cols();
  const parallel::Parts parts = pass_parts(T, d);
  SignalSums s;
  std::vector<double> work;
  const double* x0 = X.data();
  if (!centred) {  // only sum y^2 (the sums of |y| serve res_rel alone)
    column_sums(parts, d, 1, work, [&](std::size_t first, std::size_t end, double* sq) {
      for (std::size_t i = first; i < end; ++i) pass_squares(X.row(i).data(), f, sq, d);
      return 0.0;
    });
    s.ss = sum4({work.data(), d});
    return s;
  }
  // Pass 1: col, sq, dif per part.
  s.max_row = column_sums(parts, d, 3, work, [&](std::size_t first, std::size_t end, double* col) {
    double m = 0.0;
    for (std::size_t i = first; i < end; ++i)
      m = std::max(m, pass_moments(X.row(i).data(), x0, f, col, col + d, col + 2 * d, d));
    return m;
  });
  s.ss = sum4({work.data() + d, d});
  s.max_col = *std::max_element(work.begin(), work.begin() + static_cast<std::ptrdiff_t>(d));
  if (!std::isfinite(s.ss)) return s;  // non-finite input: the caller returns NaN metrics
  const double inv_t = 1.0 / static_cast<double>(T);
  std::vector<double> shift(work.begin() + static_cast<std::ptrdiff_t>(2 * d),
                            work.begin() + static_cast<std::ptrdiff_t>(3 * d));
  for (double& x : shift) x *= inv_t;
  // Pass 2: col, sq of the centred values per part.
  s.c_max_row = column_sums(parts, d, 2, work, [&](std::size_t first, std::size_t end, double* col) {
    double m = 0.0;
    for (std::size_t i = first; i < end; ++i)
      m = std::max(m, pass_centred(X.row(i).data(), x0, f, shift.data(), col, col + d, d));
    return m;
  });
  s.c_ss = sum4({work.data() + d, d});
  s.c_max_col = *std::max_element(work.begin(), work.begin() + static_cast<std::ptrdiff_t>(d));
  return s;
}

// The Gram route of spectral_summary for the Gram matrix of sqrt(alpha) A: false (r untouched)
// when it is not accurate enough (a collapsed spectrum, when s_2 is wanted: `second`) or the
// eigensolver failed. `g` receives the Gram matrix's trace and Frobenius norm whenever it was
// formed (g->trace > 0 then). Without `second` s_2 is NaN: lambda_1 has absolute error ~k eps
// lambda_1 whatever lambda_2 is.
bool gram_summary(const Matrix& A, double alpha, bool second, SpectralSummary& r, linalg::GramTop* g_out = nullptr) {
  const std::size_t k = std::min(A.rows(), A.cols());
  linalg::GramTop g;
  try {
    // decline: lambda_2 / lambda_1 provably below the threshold (s_2 / s_1 below sqrt of it)
    g = linalg::gram_top(A, alpha, second ? gram_threshold : 0.0, second);
  } catch (const LinalgError&) {  // the eigensolver did not converge: the SVD decides
    return false;
  }
  if (g_out) *g_out = g;
  if (!g.solved) return false;
  if (!(g.lambda1 > 0.0 && (!second || k < 2 || g.lambda2 >= gram_threshold * g.lambda1))) return false;
  r.s1 = std::sqrt(g.lambda1);
  r.s2 = second ? std::sqrt(g.lambda2) : nan;
  r.sum2 = g.trace / g.lambda1;
  r.sum4 = g.fro2 / (g.lambda1 * g.lambda1);
  r.route = SpectralSummary::Route::gram;
  return true;
}

// A collapsed spectrum (s_2 / s_1 below what the Gram route resolves): s_1, s_2 by Lanczos on A
// itself, to 1e-13 relative or the floor of a few eps s_1 (what dgesdd resolves of s_2 too), and
// the sums from the trace and Frobenius norm `g` of A's Gram matrix (exact to ~k eps, as they are
// dominated by s_1). A few to a few tens of steps on collapsed Markov and softmax stacks, far
// cheaper than dgesdd (bench_metrics BM_route_lanczos against BM_route_dgesdd, docs/BENCHMARKS.md
// "Metric kernels"). Lanczos runs on A, the summary is that of c A (c > 0: no scaled copy of A).
// False when it does not converge in 100 steps.
bool lanczos_summary(const Matrix& A, double c, const linalg::GramTop& g, SpectralSummary& r) {
  if (!(g.trace > 0.0) || !std::isfinite(g.fro2)) return false;
  const linalg::TopSingular top = linalg::top_singular_values(A, 1e-13, 100);
  if (!top.converged || !(top.s1 > 0.0)) return false;
  r.s1 = c * top.s1;
  r.s2 = c * top.s2;
  const double s1sq = r.s1 * r.s1;
  r.sum2 = g.trace / s1sq;
  r.sum4 = g.fro2 / (s1sq * s1sq);
  r.route = SpectralSummary::Route::lanczos;
  return true;
}

SpectralSummary svd_summary(const Matrix& A) {
  SpectralSummary r;
  const std::size_t k = std::min(A.rows(), A.cols());
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

// Exponents e of max |x| (in [2^(e-1), 2^e)) for which X is used in place: 2^-e is a normal
// double, and the Gram products x_ij x_kj (and their sums, and alpha times them) neither
// overflow nor underflow harmfully. Outside, X * 2^-e is copied first (scale_pow2).
constexpr int in_place_exponent = 400;

}  // namespace

double finite_max_abs(const Matrix& X) {
  const parallel::Parts parts = pass_parts(X.rows(), X.cols());
  std::vector<double> m(parts.count(), 0.0);
  parallel::for_each(parts.count(), [&](std::size_t p) {
    m[p] = finite_max_abs(X.values().subspan(parts.begin(p) * X.cols(), parts.length(p) * X.cols()));
  });
  double r = 0.0;
  for (double x : m) r = std::isnan(x) || std::isnan(r) ? nan : std::max(r, x);
  return r;
}

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

SpectralSummary spectral_summary(const Matrix& A, bool want_all, bool second) {
  SpectralSummary r;
  if (std::min(A.rows(), A.cols()) == 0) return r;
  // Cheapest exact route (measured in bench/, tested against the SVD route): the eigenvalues of
  // the Gram matrix give s_i^2 with absolute error ~ eps s_1^2, which is below 1e-12 relative
  // for s_1, for sum s^4 and for s_2 while s_2^2 >= gram_threshold s_1^2. Below that (a collapsed
  // signal) or when the whole spectrum is wanted, a singular-value decomposition is used.
  linalg::GramTop g;
  if (!want_all && (gram_summary(A, 1.0, second, r, &g) || lanczos_summary(A, 1.0, g, r))) return r;
  return svd_summary(A);
}

SignalMetrics signal_metrics(const Matrix& X, double log_scale, std::vector<double>* spectrum, double max_abs_x,
                             SignalNeeds needs) {
  SignalMetrics r;
  const std::size_t k = std::min(X.rows(), X.cols());
  if (spectrum) spectrum->assign(k, nan);
  if (!std::isfinite(log_scale)) return r;

  // ||X||_F = nrm * 2^e without overflow: Y = X * 2^-e has max |entry| in [0.5, 1) (exact, except
  // that entries below 2^-1022 relative to the largest become subnormal: negligible).
  const double amax = max_abs_x >= 0.0 ? max_abs_x : finite_max_abs(X);  // NaN: an entry is not finite
  if (!std::isfinite(amax)) return r;
  if (amax == 0.0) {  // exact zero (or empty): the norm is known, the shape metrics are not
    r.fro = 0.0;
    r.log_fro = -inf;
    return r;
  }
  int e = 0;
  std::frexp(amax, &e);
  // Y is X with the factor f applied on the fly, or for extreme exponents an exact scaled copy.
  const bool in_place = e >= -in_place_exponent && e <= in_place_exponent;
  Matrix Xs;
  if (!in_place) {
    Xs = Matrix(X.rows(), X.cols());
    scale_pow2(X.values(), Xs.values(), -e);
  }
  const Matrix& B = in_place ? X : Xs;
  const double f = in_place ? std::ldexp(1.0, -e) : 1.0;
  const SignalSums sums = signal_sums(B, f, needs.centred);
  if (!std::isfinite(sums.ss)) return r;  // a NaN entry
  const double nrm = std::sqrt(sums.ss);  // |y| < 1: nrm in [0.5, sqrt(size))

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

  // Spectrum of the unit-norm Xu = Y / nrm: the Gram route (dsyrk's alpha applies f^2 / nrm^2)
  // and the Lanczos route of a collapsed signal (its singular values times f / nrm) need no copy;
  // the SVD route (whole spectrum wanted, or Lanczos did not converge) needs Xu itself.
  SpectralSummary sv;
  linalg::GramTop g;
  const bool second = needs.second, top = needs.top || second;
  if (spectrum || (top && !gram_summary(B, (f * f) / sums.ss, second, sv, &g) && !lanczos_summary(B, f / nrm, g, sv))) {
    Matrix Xu = in_place ? Matrix(X.rows(), X.cols(), Matrix::uninitialized) : std::move(Xs);
    parallel::for_rows(X.rows(), X.cols(), [&](std::size_t first, std::size_t end) {
      const std::size_t at = first * X.cols(), n = (end - first) * X.cols();
      if (in_place) scale_pow2(X.values().subspan(at, n), Xu.values().subspan(at, n), -e);
      for (double& x : Xu.values().subspan(at, n)) x /= nrm;  // unit Frobenius norm
    });
    sv = svd_summary(Xu);
  }
  if (spectrum || top) {
    r.s1 = at_scale(sv.s1);  // s1 >= 1/sqrt(k) > 0 for unit Frobenius norm
    r.s2 = at_scale(sv.s2);  // NaN when not wanted
    r.sr_cov = sv.sum4;      // Mind the Gap eq. (5): sum s_i^4 / s_1^4
    r.sr_x = sv.sum2;        // sum s_i^2 / s_1^2
  }
  if (needs.centred) {
    r.mu_rel = std::sqrt(sums.c_ss) / nrm;  // lambda-skip eq. (5), relative to ||X||_F
    r.mu = at_scale(r.mu_rel);
    // Dong et al. §2: ||C||_{1,inf} / ||X||_{1,inf}, scale-invariant (sqrt of each factor, as in
    // norm_1_inf).
    r.res_rel = (std::sqrt(sums.c_max_col) * std::sqrt(sums.c_max_row)) /
                (std::sqrt(sums.max_col) * std::sqrt(sums.max_row));
  }
  if (needs.best_residual) r.res_best = best_residual(X).value;  // scale-free: X as it is (it scales itself)
  if (spectrum) *spectrum = std::move(sv.sv);
  return r;
}

MixerMetrics mixer_metrics(const Matrix& M, const linalg::LinearOperator* products, MixerNeeds needs) {
  MixerMetrics r;
  if (M.empty()) return r;
  // One pass for max |m| and the plain sum of squares: with max |m| in [2^-400, 2^400] the
  // squares neither overflow nor underflow harmfully, so the sum is ||M||_F^2 unless an entry is
  // non-finite (then it is NaN or inf). Otherwise: the finite check and the scaled two-pass norm.
  const std::span<const double> v = M.values();
  const parallel::Parts parts = pass_parts(M.rows(), M.cols());
  std::vector<std::pair<double, double>> part(parts.count());  // (max |m|, sum m^2) per part
  parallel::for_each(parts.count(), [&](std::size_t p) {
    part[p] = max_and_squares(v.subspan(parts.begin(p) * M.cols(), parts.length(p) * M.cols()));
  });
  double amax = 0.0, sum_sq = 0.0;
  for (const auto& [pm, pss] : part) {  // in part order
    amax = std::max(amax, pm);
    sum_sq += pss;
  }
  constexpr double lo = 0x1p-400, hi = 0x1p400;
  double fro = 0.0;
  if (amax >= lo && amax <= hi && std::isfinite(sum_sq)) {
    fro = std::sqrt(sum_sq);
  } else {
    if (!all_finite(v)) return r;
    fro = robust_norm(v);
  }
  r.m_fro = fro;
  if (!needs.top && !needs.second) return r;
  // s_1 and s_2 only: from T = mixer_lanczos_min_order on, Golub–Kahan–Lanczos on M (O(T^2) per
  // step, certified to 1e-13 relative) beats the Gram route's dsyrk + eigensolve (O(T^3)); measured in
  // bench/bench_metrics.cpp. Without convergence in a few dozen steps the dense route decides.
  if (M.rows() >= mixer_lanczos_min_order && M.cols() >= mixer_lanczos_min_order) {
    // From T = 2048 the dense route costs minutes per layer: let Lanczos take as long as it needs.
    const int max_steps = M.rows() >= 2048 ? 1000 : 200;
    const linalg::TopSingular top = products ? linalg::top_singular_values(*products, 1e-13, max_steps)
                                             : linalg::top_singular_values(M, 1e-13, max_steps);
    if (top.converged) {
      r.m_s1 = top.s1;
      r.m_s2 = top.s2;
      r.m_gap = r.m_s1 / r.m_s2;
      return r;
    }
  }
  const SpectralSummary sv = spectral_summary(M, false, needs.second);
  r.m_s1 = sv.s1;
  r.m_s2 = sv.s2;             // NaN when not wanted
  r.m_gap = r.m_s1 / r.m_s2;  // huge for a rank-1 mixer (uniform: s_2 ~ 1e-17), +inf if s_2 == 0
  return r;
}

LayerRow to_row(const SignalMetrics& x, const MixerMetrics& m, const MetricSet& selected) {
  // One value per registry entry, in its order: a metric added to layer_metrics without its value
  // here does not compile (an aggregate LayerRow would fill it with 0 silently).
  const double values[] = {x.fro,    x.log_fro, x.s1,   x.s2,   x.sr_cov, x.sr_x,  x.mu,
                           x.mu_rel, x.res_rel, m.m_s1, m.m_s2, m.m_gap,  m.m_fro, x.res_best};
  static_assert(std::size(values) == n_layer_metrics, "to_row: one value per entry of metrics::layer_metrics");
  LayerRow row;
  std::copy(std::begin(values), std::end(values), row.begin());
  const MetricSet kept = selected | always_computed();
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (!kept[i]) row[i] = nan;
  return row;
}

}  // namespace rcsweep::metrics
