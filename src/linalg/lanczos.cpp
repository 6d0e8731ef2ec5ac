#include "linalg/lanczos.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/error.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::linalg {
namespace {

// A fixed pseudo-random vector (splitmix64 of (salt, i), uniform in [-1, 1)): the start vector and
// the restart vectors after a breakdown. Fixed, so the result is a function of A alone.
void fixed_random(std::uint64_t salt, std::span<double> x) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint64_t z = (salt << 40) + i + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    x[i] = static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
  }
}

double norm2(std::span<const double> x) { return cblas_dnrm2(static_cast<blasint>(x.size()), x.data(), 1); }

// x <- x - B^T (B x) twice, B the first `rows` rows of the basis (row-major, x.size() columns):
// classical Gram–Schmidt, repeated ("twice is enough", Giraud et al. 2005).
void reorthogonalise(const std::vector<double>& basis, std::size_t rows, std::span<double> x, std::vector<double>& h) {
  if (rows == 0) return;
  const auto n = static_cast<blasint>(x.size()), r = static_cast<blasint>(rows);
  h.resize(rows);
  for (int pass = 0; pass < 2; ++pass) {
    cblas_dgemv(CblasRowMajor, CblasNoTrans, r, n, 1.0, basis.data(), n, x.data(), 1, 0.0, h.data(), 1);
    cblas_dgemv(CblasRowMajor, CblasTrans, r, n, -1.0, basis.data(), n, h.data(), 1, 1.0, x.data(), 1);
  }
}

// A unit vector orthogonal to the first `rows` rows of the basis, into x; false when none is
// found (the basis spans the space, up to rounding).
bool fresh_vector(std::uint64_t salt, const std::vector<double>& basis, std::size_t rows, std::span<double> x,
                  std::vector<double>& h) {
  fixed_random(salt, x);
  const double before = norm2(x);
  reorthogonalise(basis, rows, x, h);
  const double after = norm2(x);
  if (!(after > 1e-8 * before)) return false;
  for (double& v : x) v /= after;
  return true;
}

// The next basis vector from x, already orthogonalised against the first `rows` rows of the basis:
// x / ||x|| with the coefficient ||x||; or, when ||x|| <= negligible (the basis spans an invariant
// subspace), the coefficient 0 (||x|| is added to `dropped`, a perturbation of the matrix) and a
// fresh unit vector orthogonal to the basis, unless none is left: then `exhausted` is set.
double next_vector(const std::vector<double>& basis, std::size_t rows, std::span<double> x, std::vector<double>& h,
                   double negligible, std::uint64_t& salt, double& dropped, bool& exhausted) {
  const double b = norm2(x);
  if (!exhausted && (b <= negligible || b == 0.0)) {
    dropped += b;
    exhausted = !fresh_vector(salt++, basis, rows, x, h);
    return 0.0;
  }
  if (b > 0.0)
    for (double& v : x) v /= b;
  return b;
}

// Whether the convergence test runs once the basis has nb vectors: at 4, 8, 12, ... growing by
// ~1/5 (the small SVD or eigenproblem of the test is most of the cost at small sizes), at the last
// step and when the basis is exhausted.
bool check_due(std::size_t nb, std::size_t steps, bool exhausted, std::size_t& next_check) {
  if (!exhausted && nb < steps && nb != next_check) return false;
  next_check = std::max(nb + 4, nb + nb / 5);
  return true;
}

// Both Ritz values certified: err_i <= rel_tol |value_i|, or below what any backward-stable method
// resolves, 16 eps `norm` (the floor of dgesdd too: a collapsed matrix's s_2 is known to that
// absolute accuracy only).
bool certified(const TopSingular& r, double rel_tol, double norm) {
  const double floor = 16.0 * std::numeric_limits<double>::epsilon() * norm;
  const auto done = [&](double err, double x) { return err <= rel_tol * std::abs(x) || err <= floor; };
  return done(r.err1, r.s1) && done(r.err2, r.s2);
}

}  // namespace

TopSingular top_singular_values(const Matrix& A, double rel_tol, int max_steps) {
  return top_singular_values(
      LinearOperator{A.rows(), A.cols(), [&](const double* x, double* y) { gemv(A, Op::none, x, y); },
                     [&](const double* x, double* y) { gemv(A, Op::trans, x, y); }},
      rel_tol, max_steps);
}

TopSingular top_singular_values(const LinearOperator& A, double rel_tol, int max_steps) {
  // Work with the tall orientation op(A) (m >= n rows): after k = n steps the right basis spans
  // R^n, so the recurrence ends with an exact zero beta and nothing is left out of B.
  const bool wide = A.rows < A.cols;
  const std::size_t m = std::max(A.rows, A.cols), n = std::min(A.rows, A.cols), k = n;
  const auto& apply = wide ? A.apply_t : A.apply;    // R^n -> R^m
  const auto& apply_t = wide ? A.apply : A.apply_t;  // R^m -> R^n
  TopSingular r;
  if (k == 0) {
    r.converged = true;
    return r;
  }
  const std::size_t steps = std::min<std::size_t>(static_cast<std::size_t>(std::max(max_steps, 1)), k);
  // The bases grow with the steps taken (reserved, not touched: memory is used as steps are taken).
  std::vector<double> U, V(n), h;
  U.reserve(steps * m);
  V.reserve((steps + 1) * n);
  std::vector<double> alpha, beta;  // B: diagonal alpha_0..alpha_j, superdiagonal beta_0..beta_(j-1)
  std::vector<double> d, e, last;   // scratch of the small SVD
  const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n);
  std::uint64_t salt = 1;
  double dropped = 0.0;        // sum of the alpha / beta set to zero at breakdowns (a perturbation of A)
  double scale = 0.0;          // largest alpha or beta so far (a lower bound of ||A||_2)
  std::size_t next_check = 4;  // the next size of B whose singular values are computed

  fixed_random(salt++, {V.data(), n});
  const double v0 = norm2({V.data(), n});
  for (std::size_t i = 0; i < n; ++i) V[i] /= v0;

  for (std::size_t j = 0; j < steps; ++j) {
    // u_j = A v_j - beta_(j-1) u_(j-1), orthogonalised against u_0..u_(j-1)
    U.resize((j + 1) * m);
    V.resize((j + 2) * n);
    std::span<double> u(U.data() + j * m, m);
    const double* vj = V.data() + j * n;
    apply(vj, u.data());
    if (j > 0) cblas_daxpy(bm, -beta[j - 1], U.data() + (j - 1) * m, 1, u.data(), 1);
    reorthogonalise(U, j, u, h);
    double a = norm2(u);
    if (!std::isfinite(a)) throw Error("top_singular_values: the matrix has non-finite entries");
    if (a <= 1e-3 * rel_tol * scale || a == 0.0) {  // A v_j lies in span(u_0..u_(j-1)): restart u
      dropped += a;
      a = 0.0;
      if (!fresh_vector(salt++, U, j, u, h)) break;
    } else {
      for (double& x : u) x /= a;
    }
    alpha.push_back(a);
    scale = std::max(scale, a);

    // v_(j+1) = A^T u_j - alpha_j v_j, orthogonalised against v_0..v_j
    std::span<double> v(V.data() + (j + 1) * n, n);
    apply_t(u.data(), v.data());
    cblas_daxpy(bn, -a, vj, 1, v.data(), 1);
    reorthogonalise(V, j + 1, v, h);
    bool exhausted = j + 1 == k;
    const double b = next_vector(V, j + 1, v, h, 1e-3 * rel_tol * scale, salt, dropped, exhausted);
    beta.push_back(b);
    scale = std::max(scale, b);

    // Singular values of B (upper bidiagonal, size j + 1) and the last components of its left
    // singular vectors: dbdsqr applied to the row e_last^T (nru = 1) gives them in O(j^2).
    const std::size_t nb = j + 1;
    if (!check_due(nb, steps, exhausted, next_check)) continue;
    d.assign(alpha.begin(), alpha.end());
    e.assign(beta.begin(), beta.begin() + static_cast<std::ptrdiff_t>(j));
    e.push_back(0.0);
    last.assign(nb, 0.0);
    last[j] = 1.0;
    const lapack_int info = LAPACKE_dbdsqr(LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(nb), 0, 1, 0, d.data(),
                                           e.data(), nullptr, 1, last.data(), 1, nullptr, 1);
    if (info != 0) throw LinalgError("dbdsqr", info);
    // A^T U p_i - s_i V q_i = beta_j (e_last . p_i) v_(j+1): the residual bound of Ritz triplet i.
    const double b_res = exhausted ? 0.0 : b;
    r.s1 = d[0];
    r.s2 = nb >= 2 ? d[1] : 0.0;
    r.err1 = b_res * std::abs(last[0]) + dropped;
    r.err2 = (nb >= 2 ? b_res * std::abs(last[1]) : 0.0) + dropped;
    r.steps = static_cast<int>(j + 1);
    if (exhausted || (nb >= 2 && certified(r, rel_tol, r.s1))) {
      r.converged = true;
      break;
    }
  }
  if (k < 2) {
    r.s2 = 0.0;
    r.err2 = 0.0;
  }
  return r;
}

namespace {

// What top_eigenvalue_psd knows of S: its trace and squared Frobenius norm.
struct PsdSums {
  double trace = 0.0, fro2 = 0.0;
};

// Symmetric Lanczos for top_eigenvalues (psd null: both values, linear residual bounds) and
// top_eigenvalue_psd (lambda_1, quadratic bound).
TopSingular symmetric_lanczos(const Matrix& S, double rel_tol, int max_steps, const PsdSums* psd) {
  const std::size_t n = S.rows();
  if (S.cols() != n) throw Error("top_eigenvalues: needs a square (symmetric) matrix");
  TopSingular r;
  if (n == 0) {
    r.converged = true;
    return r;
  }
  const std::size_t steps = std::min<std::size_t>(static_cast<std::size_t>(std::max(max_steps, 1)), n);
  std::vector<double> V(n), h;  // the Lanczos basis, grown as steps are taken
  V.reserve((steps + 1) * n);
  std::vector<double> alpha, beta;  // T: diagonal alpha_0..alpha_j, off-diagonal beta_0..beta_(j-1)
  std::vector<double> d, e, z, wv;  // scratch of the small eigenproblem
  const auto bn = static_cast<blasint>(n);
  std::uint64_t salt = 1;
  double dropped = 0.0;  // sum of the beta set to zero at breakdowns (a perturbation of S)
  double scale = 0.0;    // largest |alpha| or beta so far (a lower bound of ||S||_2)
  std::size_t next_check = 4;

  fixed_random(salt++, {V.data(), n});
  const double v0 = norm2({V.data(), n});
  for (double& x : V) x /= v0;

  for (std::size_t j = 0; j < steps; ++j) {
    // w = S v_j - alpha_j v_j - beta_(j-1) v_(j-1), orthogonalised against v_0..v_j
    V.resize((j + 2) * n);
    const double* vj = V.data() + j * n;
    std::span<double> w(V.data() + (j + 1) * n, n);
    cblas_dsymv(CblasRowMajor, CblasUpper, bn, 1.0, S.data(), bn, vj, 1, 0.0, w.data(), 1);
    if (!std::isfinite(norm2(w))) throw Error("top_eigenvalues: the matrix has non-finite entries");
    const double a = cblas_ddot(bn, vj, 1, w.data(), 1);
    cblas_daxpy(bn, -a, vj, 1, w.data(), 1);
    if (j > 0) cblas_daxpy(bn, -beta[j - 1], V.data() + (j - 1) * n, 1, w.data(), 1);
    reorthogonalise(V, j + 1, w, h);
    alpha.push_back(a);
    scale = std::max(scale, std::abs(a));
    bool exhausted = j + 1 == n;
    const double b = next_vector(V, j + 1, w, h, 1e-3 * rel_tol * scale, salt, dropped, exhausted);
    beta.push_back(b);
    scale = std::max(scale, b);

    // The two largest eigenvalues of T (size j + 1) and their eigenvectors' last components, by
    // dstemr (MRRR: O(j) per selected pair after the eigenvalues). With dsterf + dstein instead,
    // the checks stopped certifying on Markov layer outputs (lambda_1 / lambda_2 ~ 45) and Lanczos
    // ran to its step limit (docs/BENCHMARKS.md "Metric kernels").
    const std::size_t nb = j + 1;
    if (!psd && !check_due(nb, steps, exhausted, next_check)) continue;  // psd: every step (a few)
    if (nb < 2 && n >= 2 && !exhausted) continue;
    const std::size_t m = nb >= 2 && !psd ? 2 : 1;
    d.assign(alpha.begin(), alpha.end());
    e.assign(beta.begin(), beta.begin() + static_cast<std::ptrdiff_t>(j));
    e.push_back(0.0);
    z.assign(nb * m, 0.0);
    wv.assign(nb, 0.0);  // dstemr needs all n entries (workspace); the m selected come first, ascending
    lapack_int found = 0, isuppz[4] = {0, 0, 0, 0};
    lapack_logical tryrac = 1;
    const auto ln = static_cast<lapack_int>(nb);
    if (LAPACKE_dstemr(LAPACK_COL_MAJOR, 'V', 'I', ln, d.data(), e.data(), 0.0, 0.0,
                       ln - static_cast<lapack_int>(m) + 1, ln, &found, wv.data(), z.data(), ln,
                       static_cast<lapack_int>(m), isuppz, &tryrac) != 0 ||
        found != static_cast<lapack_int>(m)) {
      if (exhausted) break;  // no next vector to go on with: not converged, the caller decides
      continue;              // no certificate at this step
    }
    // S V y_i - theta_i V y_i = beta_j (e_last . y_i) v_(j+1): the residual bound of Ritz pair i.
    const double b_res = exhausted ? 0.0 : b;
    r.s1 = wv[m - 1];
    r.s2 = m == 2 ? wv[0] : 0.0;
    r.err1 = b_res * std::abs(z[(m - 1) * nb + nb - 1]) + dropped;
    r.err2 = (m == 2 ? b_res * std::abs(z[nb - 1]) : 0.0) + dropped;
    r.steps = static_cast<int>(nb);
    if (psd) {
      if (exhausted) {
        r.converged = true;
        break;
      }
      // mu >= lambda_2, from fro2 and trace enlarged by their rounding (relative ~n eps each)
      const double t = r.s1, slack = 1.0 + 8.0 * static_cast<double>(n) * std::numeric_limits<double>::epsilon();
      const double mu = std::min(std::sqrt(std::max(0.0, psd->fro2 * slack - t * t)), psd->trace * slack - t);
      const double gap = t - mu, floor = 16.0 * std::numeric_limits<double>::epsilon() * std::max(t, scale);
      if (gap > r.err1 && r.err1 * r.err1 / gap <= std::max(rel_tol * t, floor)) {
        r.err1 = r.err1 * r.err1 / gap;
        r.converged = true;
        break;
      }
      if (nb >= 3 && 2.0 * t * t <= psd->fro2) break;  // mu cannot fall below theta_1: give up
      continue;
    }
    if (exhausted || (nb >= 2 && certified(r, rel_tol, std::max(std::abs(r.s1), scale)))) {
      r.converged = true;
      break;
    }
  }
  if (n < 2 || psd) {
    r.s2 = 0.0;
    r.err2 = 0.0;
  }
  return r;
}

}  // namespace

TopSingular top_eigenvalues(const Matrix& S, double rel_tol, int max_steps) {
  return symmetric_lanczos(S, rel_tol, max_steps, nullptr);
}

TopSingular top_eigenvalue_psd(const Matrix& S, double trace, double fro2, double rel_tol, int max_steps) {
  const PsdSums sums{trace, fro2};
  return symmetric_lanczos(S, rel_tol, max_steps, &sums);
}

}  // namespace rcsweep::linalg
