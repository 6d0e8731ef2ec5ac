#include "metrics/best_residual.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <utility>

#include "base/pow2.hpp"

#if defined(__x86_64__) || defined(__SSE2__)
#include <immintrin.h>
#endif

namespace rcsweep::metrics {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t max_cuts = 48;  // the polygon's cuts with alpha > 0 (its least product: O(cuts^3))

// The centred problem: z = X 2^-e - 1 m^T (m the column medians, so x = 0 minimises a exactly),
// its columns sorted (for the weighted medians of the lower bound), and the cuts found so far.
struct Problem {
  std::size_t T = 0, d = 0;
  std::vector<double> z;              // T x d, row-major
  std::vector<double> sorted;         // d x T: column j ascending
  std::vector<std::uint32_t> row_of;  // d x T: the row of each sorted entry
  double a_star = 0.0;                // min_x a(x), at x = 0
  // (alpha, c): alpha a + b >= c for every x; cuts[0] the best with alpha = 0 (b >= c), then the
  // latest max_cuts others (the bound found with older ones is kept as a number)
  std::vector<std::pair<double, double>> cuts = {{0.0, 0.0}};
};

// Exact a(x) = max column abs sum and b(x) = max row abs sum of z - 1 x^T.
std::pair<double, double> exact_ab(const Problem& P, const std::vector<double>& x, std::vector<double>& col) {
  col.assign(P.d, 0.0);
  double b = 0.0;
  for (std::size_t i = 0; i < P.T; ++i) {
    const double* zi = P.z.data() + i * P.d;
    double r[4] = {0.0, 0.0, 0.0, 0.0};
    std::size_t j = 0;
    for (; j + 4 <= P.d; j += 4)
      for (std::size_t l = 0; l < 4; ++l) {
        const double a = std::abs(zi[j + l] - x[j + l]);
        r[l] += a;
        col[j + l] += a;
      }
    for (; j < P.d; ++j) {
      const double a = std::abs(zi[j] - x[j]);
      r[0] += a;
      col[j] += a;
    }
    b = std::max(b, (r[0] + r[1]) + (r[2] + r[3]));
  }
  return {*std::max_element(col.begin(), col.end()), b};
}

// One row of the smoothed objective: with t = z_j - x_j, h(t) = |t| beyond nu and (t^2 + nu^2) /
// (2 nu) within (|t| <= h <= |t| + nu / 2), s = h'(t) = sign(t) min(|t|, nu) / nu: G_j += h, S_j = s,
// colS_j += s; returns the row's sum of h in 4 lanes (entry j in lane j mod 4). By intrinsics, as
// no compiler vectorises min without -ffinite-math-only: AVX2 where the CPU has it, else SSE2 (every
// x86-64), else scalar; all make the same operations on finite values (no FMA), so the same bits.
double huber_row_scalar(const double* z, const double* x, double nu, double* G, double* S, double* colS, std::size_t d,
                        std::size_t j, double r[4]) {
  const double inv_nu = 1.0 / nu, half_inv_nu = 0.5 / nu, nu2 = nu * nu;
  for (; j + 4 <= d; j += 4)
    for (std::size_t l = 0; l < 4; ++l) {
      const double t = z[j + l] - x[j + l], a = std::abs(t), c = a < nu ? a : nu;
      const double h = (a - c) + (c * c + nu2) * half_inv_nu, s = std::copysign(c, t) * inv_nu;
      r[l] += h;
      G[j + l] += h;
      S[j + l] = s;
      colS[j + l] += s;
    }
  for (; j < d; ++j) {
    const double t = z[j] - x[j], a = std::abs(t), c = a < nu ? a : nu;
    const double h = (a - c) + (c * c + nu2) * half_inv_nu, s = std::copysign(c, t) * inv_nu;
    r[0] += h;
    G[j] += h;
    S[j] = s;
    colS[j] += s;
  }
  return (r[0] + r[1]) + (r[2] + r[3]);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) double huber_row_avx2(const double* __restrict z, const double* __restrict x, double nu,
                                                      double* __restrict G, double* __restrict S,
                                                      double* __restrict colS, std::size_t d) {
  const __m256d vnu = _mm256_set1_pd(nu), vinv = _mm256_set1_pd(1.0 / nu), vhalf = _mm256_set1_pd(0.5 / nu),
                vnu2 = _mm256_set1_pd(nu * nu), sign = _mm256_set1_pd(-0.0);
  __m256d lanes = _mm256_setzero_pd();
  std::size_t j = 0;
  for (; j + 4 <= d; j += 4) {
    const __m256d t = _mm256_sub_pd(_mm256_loadu_pd(z + j), _mm256_loadu_pd(x + j));
    const __m256d a = _mm256_andnot_pd(sign, t), c = _mm256_min_pd(a, vnu);
    const __m256d h = _mm256_add_pd(_mm256_sub_pd(a, c),
                                    _mm256_mul_pd(_mm256_add_pd(_mm256_mul_pd(c, c), vnu2), vhalf));
    const __m256d s = _mm256_mul_pd(_mm256_or_pd(c, _mm256_and_pd(sign, t)), vinv);
    lanes = _mm256_add_pd(lanes, h);
    _mm256_storeu_pd(G + j, _mm256_add_pd(_mm256_loadu_pd(G + j), h));
    _mm256_storeu_pd(S + j, s);
    _mm256_storeu_pd(colS + j, _mm256_add_pd(_mm256_loadu_pd(colS + j), s));
  }
  double r[4];
  _mm256_storeu_pd(r, lanes);
  return huber_row_scalar(z, x, nu, G, S, colS, d, j, r);
}

// u_j += p s_j (the same bits in either build: one product and one sum per entry).
__attribute__((target("avx2"))) void axpy_avx2(double p, const double* __restrict s, double* __restrict u,
                                               std::size_t d) {
  for (std::size_t j = 0; j < d; ++j) u[j] += p * s[j];
}
#endif

double huber_row_sse2(const double* __restrict z, const double* __restrict x, double nu, double* __restrict G,
                      double* __restrict S, double* __restrict colS, std::size_t d) {
  double r[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t j = 0;
#if defined(__SSE2__)
  const __m128d vnu = _mm_set1_pd(nu), vinv = _mm_set1_pd(1.0 / nu), vhalf = _mm_set1_pd(0.5 / nu),
                vnu2 = _mm_set1_pd(nu * nu), sign = _mm_set1_pd(-0.0);
  __m128d lanes[2] = {_mm_setzero_pd(), _mm_setzero_pd()};
  for (; j + 4 <= d; j += 4)
    for (std::size_t k = 0; k < 2; ++k) {
      const std::size_t at = j + 2 * k;
      const __m128d t = _mm_sub_pd(_mm_loadu_pd(z + at), _mm_loadu_pd(x + at));
      const __m128d a = _mm_andnot_pd(sign, t), c = _mm_min_pd(a, vnu);
      const __m128d h = _mm_add_pd(_mm_sub_pd(a, c), _mm_mul_pd(_mm_add_pd(_mm_mul_pd(c, c), vnu2), vhalf));
      const __m128d s = _mm_mul_pd(_mm_or_pd(c, _mm_and_pd(sign, t)), vinv);
      lanes[k] = _mm_add_pd(lanes[k], h);
      _mm_storeu_pd(G + at, _mm_add_pd(_mm_loadu_pd(G + at), h));
      _mm_storeu_pd(S + at, s);
      _mm_storeu_pd(colS + at, _mm_add_pd(_mm_loadu_pd(colS + at), s));
    }
  _mm_storeu_pd(r, lanes[0]);
  _mm_storeu_pd(r + 2, lanes[1]);
#endif
  return huber_row_scalar(z, x, nu, G, S, colS, d, j, r);
}

#if defined(__x86_64__)
const bool has_avx2 = __builtin_cpu_supports("avx2");
#else
constexpr bool has_avx2 = false;
#endif

double huber_row(const double* z, const double* x, double nu, double* G, double* S, double* colS, std::size_t d) {
#if defined(__x86_64__)
  if (has_avx2) return huber_row_avx2(z, x, nu, G, S, colS, d);
#endif
  return huber_row_sse2(z, x, nu, G, S, colS, d);
}

void axpy(double p, const double* s, double* u, std::size_t d) {
#if defined(__x86_64__)
  if (has_avx2) return axpy_avx2(p, s, u, d);
#endif
  for (std::size_t j = 0; j < d; ++j) u[j] += p * s[j];
}

// mu log sum_k exp(v_k / mu) and its softmax weights w (sum 1).
double log_sum_exp(const std::vector<double>& v, double mu, std::vector<double>& w) {
  const double m = *std::max_element(v.begin(), v.end());
  w.resize(v.size());
  double s = 0.0;
  for (std::size_t k = 0; k < v.size(); ++k) s += w[k] = std::exp((v[k] - m) / mu);
  for (double& x : w) x /= s;
  return m + mu * std::log(s);
}

// The smoothed objective at x: a and b with |.| replaced by the Huber function h (|t| <= h(t) <=
// |t| + nu/2) and max by mu log-sum-exp. alpha < 0: log A + log B (the product); else alpha A + B.
// Returns the objective; fills grad, the softmax weights q (columns) and p (rows), A and B.
struct Smoothed {
  double mu_a, mu_b, nu, alpha;
  std::vector<double> G, R, colS, u, S, q, p;
  double A = 0.0, B = 0.0;
  int evaluations = 0;

  double operator()(const Problem& P, const std::vector<double>& x, std::vector<double>& grad) {
    const std::size_t T = P.T, d = P.d;
    G.assign(d, 0.0);
    colS.assign(d, 0.0);
    R.assign(T, 0.0);
    S.resize(T * d);
    ++evaluations;
    for (std::size_t i = 0; i < T; ++i) {
      const double* zi = P.z.data() + i * d;
      double* si = S.data() + i * d;
      R[i] = huber_row(zi, x.data(), nu, G.data(), si, colS.data(), d);
    }
    A = log_sum_exp(G, mu_a, q);
    B = log_sum_exp(R, mu_b, p);
    u.assign(d, 0.0);
    for (std::size_t i = 0; i < T; ++i) {
      const double* si = S.data() + i * d;
      const double pi = p[i];
      axpy(pi, si, u.data(), d);
    }
    grad.resize(d);
    if (alpha < 0.0) {
      const double ca = 1.0 / A, cb = 1.0 / B;
      for (std::size_t j = 0; j < d; ++j) grad[j] = -(ca * q[j] * colS[j] + cb * u[j]);
      return std::log(A) + std::log(B);
    }
    for (std::size_t j = 0; j < d; ++j) grad[j] = -(alpha * q[j] * colS[j] + u[j]);
    return alpha * A + B;
  }
};

// D = sum_j min_z sum_i (alpha q_j + p_i) |z_ij - z| (weights normalised to sum 1 each): alpha a(x)
// + b(x) >= D for every x. The inner minimum is at a weighted median of column j.
double cut_value(const Problem& P, double alpha, const std::vector<double>& q, const std::vector<double>& p) {
  const double sq = std::accumulate(q.begin(), q.end(), 0.0), sp = std::accumulate(p.begin(), p.end(), 0.0);
  double total = 0.0;
  std::vector<double> w(P.T);
  for (std::size_t j = 0; j < P.d; ++j) {
    const double* v = P.sorted.data() + j * P.T;
    const std::uint32_t* row = P.row_of.data() + j * P.T;
    const double cj = alpha > 0.0 ? alpha * q[j] / sq : 0.0;
    double W = 0.0;
    for (std::size_t k = 0; k < P.T; ++k) W += w[k] = cj + p[row[k]] / sp;
    double acc = 0.0;
    std::size_t k = 0;
    while (k + 1 < P.T && (acc += w[k]) < 0.5 * W) ++k;
    const double zm = v[k];
    double s = 0.0;
    for (std::size_t l = 0; l < P.T; ++l) s += w[l] * std::abs(v[l] - zm);
    total += s;
  }
  return total;
}

// The least a b over {a >= a_star, alpha_k a + b >= c_k for every cut}: at a = a_star or where two
// cuts meet (a b is concave on each edge of the polygon). Also the a where it is attained.
std::pair<double, double> polygon_bound(const Problem& P) {
  auto beta = [&](double a) {
    double b = 0.0;
    for (const auto& [al, c] : P.cuts) b = std::max(b, c - al * a);
    return b;
  };
  double best = P.a_star * beta(P.a_star), at = P.a_star;
  for (std::size_t k = 0; k < P.cuts.size(); ++k)
    for (std::size_t l = k + 1; l < P.cuts.size(); ++l) {
      const auto [ak, ck] = P.cuts[k];
      const auto [al, cl] = P.cuts[l];
      if (ak == al) continue;
      const double a = (ck - cl) / (ak - al);
      if (!(a > P.a_star) || !std::isfinite(a)) continue;
      const double v = a * beta(a);
      if (v < best) best = v, at = a;
    }
  return {best, at};
}

// Limited-memory BFGS with a backtracking (Armijo) line search, from x, at most `max_iter`
// iterations, no entry of a step beyond `max_step` (the data's range: the curvature of a nearly
// flat direction would otherwise send it far away); `check` is called every `check_every`
// iterations and stops the run when it returns true. Returns the iterations made.
int lbfgs(const std::function<double(const std::vector<double>&, std::vector<double>&)>& f, std::vector<double>& x,
          double max_step, int max_iter, int check_every, const std::function<bool()>& check) {
  constexpr std::size_t memory = 8;
  const std::size_t n = x.size();
  std::vector<std::vector<double>> s_hist, y_hist;
  std::vector<double> rho_hist, alpha(memory);
  std::vector<double> g(n), dir(n), xn(n), gn(n);
  double fx = f(x, g);
  int it = 0, stalls = 0;
  for (; it < max_iter; ++it) {
    // Two-loop recursion: dir = -H g.
    dir = g;
    const std::size_t m = s_hist.size();
    for (std::size_t k = m; k-- > 0;) {
      double dot = 0.0;
      for (std::size_t j = 0; j < n; ++j) dot += s_hist[k][j] * dir[j];
      alpha[k] = rho_hist[k] * dot;
      for (std::size_t j = 0; j < n; ++j) dir[j] -= alpha[k] * y_hist[k][j];
    }
    double gamma = 1.0;
    if (m > 0) {
      double sy = 0.0, yy = 0.0;
      for (std::size_t j = 0; j < n; ++j)
        sy += s_hist[m - 1][j] * y_hist[m - 1][j], yy += y_hist[m - 1][j] * y_hist[m - 1][j];
      gamma = yy > 0.0 ? sy / yy : 1.0;
    } else {
      double gmax = 0.0;
      for (double v : g) gmax = std::max(gmax, std::abs(v));
      if (gmax == 0.0) break;
      gamma = 1e-3 / gmax;
    }
    for (double& v : dir) v *= gamma;
    for (std::size_t k = 0; k < m; ++k) {
      double dot = 0.0;
      for (std::size_t j = 0; j < n; ++j) dot += y_hist[k][j] * dir[j];
      const double beta = rho_hist[k] * dot;
      for (std::size_t j = 0; j < n; ++j) dir[j] += (alpha[k] - beta) * s_hist[k][j];
    }
    for (double& v : dir) v = -v;
    double gd = 0.0;
    for (std::size_t j = 0; j < n; ++j) gd += g[j] * dir[j];
    if (!(gd < 0.0)) {  // not a descent direction: restart from the gradient
      s_hist.clear(), y_hist.clear(), rho_hist.clear();
      double gmax = 0.0;
      for (double v : g) gmax = std::max(gmax, std::abs(v));
      if (gmax == 0.0) break;
      gd = 0.0;
      for (std::size_t j = 0; j < n; ++j) dir[j] = -g[j] * 1e-3 / gmax, gd += g[j] * dir[j];
    }
    double dmax = 0.0, fn = 0.0;
    for (double v : dir) dmax = std::max(dmax, std::abs(v));
    double t = dmax > max_step ? max_step / dmax : 1.0;
    bool ok = false;
    for (int ls = 0; ls < 40; ++ls, t *= 0.5) {
      for (std::size_t j = 0; j < n; ++j) xn[j] = x[j] + t * dir[j];
      fn = f(xn, gn);
      if (fn <= fx + 1e-4 * t * gd) {
        ok = true;
        break;
      }
    }
    if (!ok) break;
    std::vector<double> s(n), y(n);
    double sy = 0.0;
    for (std::size_t j = 0; j < n; ++j) s[j] = xn[j] - x[j], y[j] = gn[j] - g[j], sy += s[j] * y[j];
    if (sy > 0.0) {
      if (s_hist.size() == memory)
        s_hist.erase(s_hist.begin()), y_hist.erase(y_hist.begin()), rho_hist.erase(rho_hist.begin());
      s_hist.push_back(std::move(s)), y_hist.push_back(std::move(y)), rho_hist.push_back(1.0 / sy);
    }
    stalls = fx - fn <= 1e-15 * std::abs(fn) ? stalls + 1 : 0;
    std::swap(x, xn), std::swap(g, gn), fx = fn;
    if ((it + 1) % check_every == 0 && check()) return it + 1;
    if (stalls >= 5) return it + 1;
  }
  return it;
}

}  // namespace

BestResidual best_residual(const Matrix& X, std::vector<double>* row) {
  BestResidual r;
  const std::size_t T = X.rows(), d = X.cols();
  if (row) row->assign(d, nan);
  if (T == 0 || d == 0) return r;
  double amax = 0.0;
  for (double v : X.values()) {
    if (!std::isfinite(v)) return r;
    amax = std::max(amax, std::abs(v));
  }
  if (amax == 0.0) return r;  // 0 / 0, as res_rel
  int e = 0;
  std::frexp(amax, &e);
  Matrix Y(T, d, Matrix::uninitialized);
  scale_pow2(X.values(), Y.values(), -e);  // exact: |y| in [0.5, 1) at most

  // ||Y||_{1,inf} and the sorted columns.
  Problem P;
  P.T = T, P.d = d;
  P.sorted.resize(T * d);
  P.row_of.resize(T * d);
  std::vector<double> median(d);
  double norm_col = 0.0, norm_row = 0.0;
  {
    std::vector<std::pair<double, std::uint32_t>> col(T);
    for (std::size_t j = 0; j < d; ++j) {
      double s = 0.0;
      for (std::size_t i = 0; i < T; ++i) col[i] = {Y(i, j), static_cast<std::uint32_t>(i)}, s += std::abs(Y(i, j));
      norm_col = std::max(norm_col, s);
      std::sort(col.begin(), col.end());
      median[j] = col[(T - 1) / 2].first;
      for (std::size_t k = 0; k < T; ++k)
        P.sorted[j * T + k] = col[k].first - median[j], P.row_of[j * T + k] = col[k].second;
    }
    for (std::size_t i = 0; i < T; ++i) {
      double s = 0.0;
      for (double v : Y.row(i)) s += std::abs(v);
      norm_row = std::max(norm_row, s);
    }
  }
  const double norm = std::sqrt(norm_col) * std::sqrt(norm_row);
  P.z.resize(T * d);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) P.z[i * d + j] = Y(i, j) - median[j];

  std::vector<double> col, best_x(d, 0.0);
  const auto [a0, b0] = exact_ab(P, best_x, col);
  P.a_star = a0;
  double best = a0 * b0, best_a = a0;  // a b and a at the best x so far
  Smoothed sm{};
  auto finish = [&](double lower_sq) {
    r.evaluations = sm.evaluations;
    r.value = std::sqrt(best) / norm;
    // at most the value (where the two meet, the lower bound's own rounding could exceed it)
    r.lower = std::min(std::sqrt(std::max(lower_sq, 0.0)) / norm, r.value);
    if (row)
      for (std::size_t j = 0; j < d; ++j) (*row)[j] = std::ldexp(median[j] + best_x[j], e);
    return r;
  };
  if (a0 == 0.0) return finish(0.0);  // every column constant (T = 1, or all rows equal): 0
  {                                   // the token mean, res_rel's x: the value never exceeds res_rel
    std::vector<double> mean(d, 0.0);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < d; ++j) mean[j] += P.z[i * d + j];
    for (double& v : mean) v /= static_cast<double>(T);
    const auto [a, b] = exact_ab(P, mean, col);
    if (a * b < best) best = a * b, best_a = a, best_x = mean;
  }

  // Smoothing scale: the mean absolute deviation from the column medians; the largest step: twice
  // the largest.
  double sigma = 0.0, max_step = 0.0;
  for (double v : P.z) sigma += std::abs(v), max_step = std::max(max_step, 2.0 * std::abs(v));
  sigma /= static_cast<double>(T * d);
  const double tol = best_residual_tolerance;

  std::vector<double> x = best_x, grad;
  double lower_sq = 0.0;
  // Records x as an upper bound and the smoothed weights at x as cuts; true when certified.
  auto certify = [&](const std::vector<double>& at, double alpha) {
    const auto [a, b] = exact_ab(P, at, col);
    if (a * b < best) best = a * b, best_a = a, best_x = at;
    sm(P, at, grad);
    if (alpha < 0.0) alpha = sm.B / sm.A;
    P.cuts.emplace_back(alpha, cut_value(P, alpha, sm.q, sm.p));
    if (P.cuts.size() > max_cuts + 1) P.cuts.erase(P.cuts.begin() + 1);
    P.cuts[0].second = std::max(P.cuts[0].second, cut_value(P, 0.0, sm.q, sm.p));
    lower_sq = std::max(lower_sq, polygon_bound(P).first);
    return best <= lower_sq * (1.0 + tol) * (1.0 + tol) ||
           std::sqrt(best) - std::sqrt(lower_sq) <= best_residual_floor * norm;  // rounding decides below it
  };
  for (int stage = 0; stage < 4; ++stage) {
    const double kappa = std::pow(10.0, -stage);
    sm.mu_a = sm.mu_b = 0.1 * kappa * sigma;
    sm.nu = 0.01 * kappa * sigma;
    sm.alpha = -1.0;
    ++r.stages;
    bool done = false;
    auto product = [&](const std::vector<double>& at, std::vector<double>& g) { return sm(P, at, g); };
    r.iterations += lbfgs(product, x, max_step, 2000, 20, [&] {
      done = certify(x, -1.0);
      sm.alpha = -1.0;
      return done;
    });
    if (done || certify(x, -1.0)) return finish(lower_sq);
    // The cuts leave a corner below the frontier away from the best x (else the smoothing decides:
    // the next stage): a cut where the product's level line touches it, from the weighted
    // problem's optimum (a few, each where the last left the least product).
    for (int cut = 0; cut < 8; ++cut) {
      const auto [v, a_v] = polygon_bound(P);
      if (std::abs(a_v - best_a) <= 10.0 * tol * best_a) break;
      double alpha_v = (v / a_v) / a_v;
      if (!(alpha_v > 0.0) || !std::isfinite(alpha_v)) alpha_v = 1e-3 * sm.B / sm.A;  // no lower bound of b yet
      std::vector<double> xw = best_x;
      sm.alpha = alpha_v;
      auto weighted = [&](const std::vector<double>& at, std::vector<double>& g) { return sm(P, at, g); };
      r.iterations += lbfgs(weighted, xw, max_step, 2000, 1000000, [] { return false; });
      sm.alpha = alpha_v;
      if (certify(xw, alpha_v)) return finish(lower_sq);
    }
  }
  finish(lower_sq);
  r.value = nan;  // not certified
  return r;
}

}  // namespace rcsweep::metrics
