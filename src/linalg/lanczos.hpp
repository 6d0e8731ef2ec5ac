// The two largest singular values of a matrix (Golub–Kahan–Lanczos bidiagonalisation) or
// eigenvalues of a symmetric one (symmetric Lanczos) without a full decomposition, with full
// reorthogonalisation, stopped by a certified residual bound.
#pragma once
#include <cstddef>
#include <functional>

#include "base/matrix.hpp"

namespace rcsweep::linalg {

/// Result of top_singular_values. When `converged`, A has singular values within `err1` of s1 and
/// within `err2` of s2 (the residual bounds of the Ritz triplets, Golub & Van Loan §10.4); s1 and
/// s2 are Ritz values, so s1 <= s_1(A) and s2 <= s_2(A) (interlacing).
struct TopSingular {
  double s1 = 0.0, s2 = 0.0;
  double err1 = 0.0, err2 = 0.0;
  int steps = 0;           ///< bidiagonalisation steps taken (matrix-vector products with A and A^T each)
  bool converged = false;  ///< false: max_steps reached before both bounds were below the tolerance
};

/// s_1 and s_2 of A (m x n) by Golub–Kahan–Lanczos with full (twice classical Gram–Schmidt)
/// reorthogonalisation of both Lanczos bases, from a fixed start vector (so the result depends on
/// A only). Stops when each err_i <= rel_tol * s_i or <= 16 eps s1 (the absolute accuracy of any
/// backward-stable method, dgesdd's too: it bounds a collapsed matrix's s2), or after max_steps steps
/// (converged = false; the caller then uses a dense method). Cost per step: one product with A and
/// one with A^T (4 m n flops) plus the reorthogonalisation (8 j (m + n) flops at step j); memory
/// (max_steps + 1) (m + n) doubles. An exact invariant subspace (a zero alpha or beta) restarts the
/// recurrence with a new vector orthogonal to the basis, so repeated singular values are found.
/// A must be finite. min(m, n) < 2 gives s2 = 0.
TopSingular top_singular_values(const Matrix& A, double rel_tol, int max_steps);

/// A rows x cols matrix given by its products: apply(x, y) sets y (rows) = A x (x: cols entries),
/// apply_t(u, z) sets z (cols) = A^T u. For matrices with structure (the SSD mixer is
/// semiseparable: its products cost O(T N) instead of O(T^2)).
struct LinearOperator {
  std::size_t rows = 0, cols = 0;
  std::function<void(const double*, double*)> apply, apply_t;
};
/// top_singular_values of the operator A (the same recurrence and certificate; the products
/// must be backward stable, as dgemv's are, for the bounds to hold up to rounding).
TopSingular top_singular_values(const LinearOperator& A, double rel_tol, int max_steps);

/// The two largest eigenvalues (s1 = lambda_1 >= s2 = lambda_2) of the symmetric S (n x n; only
/// its upper triangle is read) by symmetric Lanczos with full reorthogonalisation, from the same
/// fixed start vector, certified as top_singular_values (err_i = beta_j |e_last . y_i|, the
/// residual of Ritz pair i, Golub & Van Loan §10.1; stop at rel_tol |lambda_i| or 16 eps ||S||).
/// One product with S per step (dsymv, which reads half of S) instead of two: for a Gram matrix
/// fewer products than Golub–Kahan–Lanczos on the same matrix (bench/bench_metrics.cpp
/// BM_gram_eig_*, docs/BENCHMARKS.md "Metric kernels"). n < 2 gives s2 = 0.
TopSingular top_eigenvalues(const Matrix& S, double rel_tol, int max_steps);

/// lambda_1 alone of the symmetric positive semi-definite S (upper triangle read), given its trace
/// and squared Frobenius norm fro2: the same Lanczos recurrence from the same start vector,
/// certified by the quadratic bound |lambda_1 - theta_1| <= err^2 / (theta_1 - mu) (Kato–Temple;
/// err the residual of the Ritz pair) with mu = min(sqrt(fro2 - theta_1^2), trace - theta_1), an
/// upper bound of lambda_2 as lambda_1 >= theta_1, valid where theta_1 - mu > err. Stops when that
/// bound is below rel_tol theta_1 (or 16 eps ||S||): converged, s1 = theta_1, err1 the bound, s2 = 0
/// (not computed). mu < theta_1 needs theta_1^2 > fro2 / 2: a nearly rank-one S (the Gram matrix of
/// a collapsed signal), whose lambda_1 this finds in a few steps instead of a tridiagonalisation.
/// Gives up (converged = false) after 3 steps while theta_1^2 <= fro2 / 2, and after max_steps.
TopSingular top_eigenvalue_psd(const Matrix& S, double trace, double fro2, double rel_tol, int max_steps);

}  // namespace rcsweep::linalg
