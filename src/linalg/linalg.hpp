// The only place that calls BLAS/LAPACK. All matrices are rcsweep::Matrix (row-major).
#pragma once
#include <algorithm>
#include <complex>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "base/parallel.hpp"

namespace rcsweep::linalg {

enum class Op { none, trans };


/// The fixed partition gemm computes C in, one BLAS call per part, the parts on the rank's threads
/// (base/parallel.hpp): a function of the shapes and of the BLAS kernel only, so C is bitwise the
/// same on any number of threads. Products under gemm_split_min_flops are one call; larger ones
/// are cut along C's rows (columns when C is wider than tall) into parts of gemm_part_size.
/// Where the BLAS multiplies small products without packing (unpacked_gemm_limit() > 0), a
/// product op(A) op(B) without transposes whose m n k exceeds that limit is cut along C's columns
/// into pieces that stay within it: as many columns as fit, a multiple of 8, at least
/// gemm_min_piece (else one call): the pieces skip the BLAS's packing, which one call of that size
/// would do (the measured effect: docs/BENCHMARKS.md "Products cut for the unpacked kernels").
struct GemmParts {
  bool columns = false;  ///< parts of C's columns (else of its rows)
  parallel::Parts parts;
};
inline constexpr double gemm_split_min_flops = 268435456.0;  // 2^28: a d = 512 W_Q W_K^T and larger
inline constexpr std::size_t gemm_part_size = 256;
inline constexpr std::size_t gemm_min_piece = 16;
/// M N K up to which OpenBLAS's SkylakeX and Cooperlake cores multiply without packing (100^3).
inline constexpr double openblas_unpacked_limit = 1e6;
/// m n k up to which the BLAS in use multiplies without packing: openblas_unpacked_limit for OpenBLAS on its
/// SkylakeX and Cooperlake cores (from 0.3.16: the small-matrix kernels its dgemm takes while
/// M N K <= 100^3, for every transpose but column-major TN), 0 (never) on every other core. Fixed
/// for the process (set_unpacked_gemm_limit aside).
double unpacked_gemm_limit();
/// Overrides unpacked_gemm_limit for the rest of the process (tests and benchmarks: the pieces on
/// any CPU); returns the previous value. Not thread-safe: call it before any product.
double set_unpacked_gemm_limit(double limit);
/// With `split_parts` > 0 (opt-in; 0 is the partition above) a product from gemm_split_min_flops
/// on is cut, along the same dimension, into at most split_parts parts of equal size rounded up to
/// a multiple of gemm_split_align (the last shorter): wider parts for a caller whose operand would
/// be packed again for every one of the default's (a wide X W whose every part packs all of X).
/// The caller passes a constant or a function of the shapes, never of the thread count, so that
/// the bits stay the same on any number of threads.
inline constexpr std::size_t gemm_split_align = 8;
GemmParts gemm_parts(std::size_t m, std::size_t n, std::size_t k, bool transposed = false,
                     double unpacked_limit = unpacked_gemm_limit(), std::size_t split_parts = 0);

/// Products of m n k in (above, up_to]; empty when up_to <= above.
struct MnkRange {
  double above = 0.0, up_to = 0.0;
  bool empty() const noexcept { return !(up_to > above); }
  bool contains(double mnk) const noexcept { return mnk > above && mnk <= up_to; }
  bool operator==(const MnkRange&) const = default;
};
/// The BLAS calls BLIS makes instead of OpenBLAS (linalg/blis.hpp): those of gemm's parts and
/// pieces (after gemm_parts' cut) whose m n k lies in `plain` (op(A) op(B) without transposes) or
/// in `transposed` (a transposed operand): the two kinds of call run different code in both
/// libraries and are faster in BLIS at different sizes. Empty (the default): none. Which library
/// multiplies a call is a function of its shape only, so C is bitwise the same on any number of
/// threads and ranks for given ranges and kernels; blas_kernel() names both. The ranges are
/// measured per machine by `rcsweep calibrate` (plan::measure_blis_range).
struct BlisRange {
  MnkRange plain, transposed;
  bool empty() const noexcept { return plain.empty() && transposed.empty(); }
  bool contains(bool transposed_call, double mnk) const noexcept {
    return (transposed_call ? transposed : plain).contains(mnk);
  }
  bool operator==(const BlisRange&) const = default;
};
/// Every call: BLIS for all of gemm's products.
inline constexpr BlisRange blis_everywhere{{0.0, 1e300}, {0.0, 1e300}};
BlisRange blis_range();
/// Sets the range for the rest of the process; returns the previous one. Throws Error for a
/// non-empty range when BLIS is not available. Not thread-safe: call it before any product.
BlisRange set_blis_range(BlisRange range);

/// C = alpha * op(A) * op(B) + beta * C (dgemm). C must already have the result's shape. A and B
/// may be views of row blocks of larger matrices (a Matrix converts to a view of itself).
/// `unpacked_limit` (default unpacked_gemm_limit()) is gemm_parts': 0 never cuts a product for the
/// unpacked kernels, which read B as it lies; a B out of cache (an encoder's weights) streams
/// faster through the BLAS's packing (docs/BENCHMARKS.md "Encoder blocks (bert-base) against PyTorch").
/// `split_parts` (default 0: gemm_part_size) is gemm_parts' too.
void gemm(double alpha, ConstMatrixView A, Op opA, ConstMatrixView B, Op opB, double beta, Matrix& C,
          double unpacked_limit = unpacked_gemm_limit(), std::size_t split_parts = 0);

/// Returns op(A) * op(B) as a new matrix.
Matrix matmul(const Matrix& A, const Matrix& B, Op opA = Op::none, Op opB = Op::none);

/// y = A x (op none; y has A.rows() entries) or A^T x (trans; A.cols() entries), x and y not
/// overlapping. Large A (from gemv_split_min_entries entries) is read in parts of gemv_part_size
/// rows, one dgemv each, on the rank's threads; A^T x then sums the parts' products in part
/// order. The partition depends on the shape only: bitwise the same on any number of threads.
/// 2^20 entries (8 MiB, a 2048 x 512 X): a smaller product is read from cache in a few tens of
/// microseconds, where the threads' start and wait cost more than they gain.
inline constexpr std::size_t gemv_split_min_entries = std::size_t{1} << 20;
inline constexpr std::size_t gemv_part_size = 256;
parallel::Parts gemv_parts(std::size_t rows, std::size_t cols);
void gemv(const Matrix& A, Op op, const double* x, double* y);

/// All min(m, n) singular values of A, descending (dgesdd, values only). A is not modified.
/// From min(m, n) = 64 on, a matrix whose long side is at least twice its short side is first
/// reduced to the triangle R of its QR factorisation, in fixed row blocks on the rank's threads
/// (bitwise the same on any number of threads; Error for a non-finite entry of such a matrix).
/// Throws LinalgError if LAPACK does not converge.
std::vector<double> singular_values(const Matrix& A);
/// Whether singular_values reduces a matrix of short side k and long side n to R first, and into
/// how many row blocks.
constexpr bool qr_first(std::size_t k, std::size_t n) { return k >= 64 && n >= 2 * k; }
constexpr std::size_t qr_first_blocks(std::size_t k, std::size_t n) { return std::min<std::size_t>(n / (2 * k), 16); }
/// Doubles singular_values allocates for an m x n matrix besides its result, at most (every row
/// block at once): a copy of the matrix, the blocks' R and about 4 k^2 + 8 n of LAPACK workspace.
constexpr std::size_t singular_values_scratch(std::size_t m, std::size_t n) {
  const std::size_t k = std::min(m, n), l = std::max(m, n);
  return m * n + (qr_first(k, l) ? qr_first_blocks(k, l) * k * k : 0) + 4 * k * k + 8 * l;
}

/// All n eigenvalues of the square matrix A (n x n), complex in general (dgeev, no
/// eigenvectors, on a copy: A is not modified). Order, deterministic for a given A: descending
/// modulus |lambda|, then descending real part, then descending imaginary part (so a conjugate
/// pair comes as a + bi, a - bi with b > 0). Throws Error when A is not square or has a
/// non-finite entry, LinalgError if LAPACK does not converge.
std::vector<std::complex<double>> eigenvalues(const Matrix& A);

/// What the metrics need from the smaller Gram matrix G of A (A A^T if rows <= cols, else
/// A^T A): its two largest eigenvalues (= s_1^2, s_2^2 of A, each with absolute error of order
/// eps * s_1^2, so s_2 is accurate only while s_2 / s_1 is well above sqrt(eps)), its trace
/// (= sum s_i^2) and its squared Frobenius norm (= sum s_i^4).
/// Costs about half a GEMM (dsyrk, or unpacked GEMM pieces: gram_piece), k = min(m, n), plus the
/// two eigenvalues: a k x k Householder tridiagonalisation and bisection below
/// gram_lanczos_min_order, symmetric Lanczos from it on.
/// With `alpha` the Gram matrix is that of sqrt(alpha) A (dsyrk's alpha: no scaled copy of A);
/// the caller must keep the products alpha * a_ij * a_kj and the raw sums a_ij * a_kj free of
/// overflow and harmful underflow (OpenBLAS may apply alpha before or after the sum).
struct GramTop {
  double lambda1 = 0.0, lambda2 = 0.0, trace = 0.0, fro2 = 0.0;
  bool solved = true;  ///< false: declined (see decline_below), lambda1/lambda2 not computed
};
/// With decline_below > 0, the eigensolve is skipped (solved = false) when trace and Frobenius
/// norm alone prove lambda_2 < decline_below * lambda_1 (a nearly rank-1 G, whose lambda_2 the
/// Gram route could not resolve anyway). Without `second` only lambda_1 is wanted: the bisection
/// stops after it (lambda_1 bitwise the same, lambda_2 NaN; the Lanczos route finds both).
GramTop gram_top(const Matrix& A, double alpha = 1.0, double decline_below = 0.0, bool second = true);
/// From this order k on, gram_top finds the two eigenvalues by symmetric Lanczos (top_eigenvalues,
/// to 1e-13 relative) instead of the tridiagonalisation, which decides when Lanczos does not
/// converge in 200 steps. The crossover is measured for Gaussian signals by bench_metrics
/// BM_gram_eig_* (docs/BENCHMARKS.md "Metric kernels").
inline constexpr std::size_t gram_lanczos_min_order = 224;
/// Without `second`, from this order on (below gram_lanczos_min_order) gram_top first tries
/// top_eigenvalue_psd for lambda_1 with at most gram_psd_lanczos_steps steps: a collapsed
/// signal's Gram matrix is certified in a few, any other gives up after 3.
inline constexpr std::size_t gram_psd_lanczos_min_order = 32;
inline constexpr int gram_psd_lanczos_steps = 12;
/// From this order k on, gram_top forms G in column parts on the rank's threads (one GEMM per
/// part, a partition fixed by the shapes) instead of one dsyrk.
inline constexpr std::size_t gram_split_min_order = 512;
/// Columns per part of a split Gram matrix: its parts are rectangles G[0:end, part] of growing
/// height, and at k = 512 four of them balance 2 threads (5 : 5 of 10 units; two parts of 256
/// would be 3 : 1).
inline constexpr std::size_t gram_part_size = 128;
/// Columns per piece of a small Gram matrix formed by unpacked GEMMs (gram_top, where
/// unpacked_gemm_limit() > 0): the narrowest of 8, 16, 24, 32 was the fastest at every shape of
/// the Mind the Gap grid (docs/BENCHMARKS.md "Products cut for the unpacked kernels").
inline constexpr std::size_t gram_piece = 8;

/// Householder reduction of the symmetric A (n x n; only its upper triangle is read, and it is
/// overwritten) to the tridiagonal Q^T A Q with diagonal d (n) and off-diagonal e (n - 1): what
/// LAPACK's dsytrd computes (up to rounding and the signs of e), without Q. The rank-2 update of
/// each step and the matrix-vector product of the next are one pass over the triangle, which
/// makes it faster than dsytrd at the orders of the grids and as fast from a few hundred on
/// (bench_kernels BM_tridiagonal_own against BM_tridiagonal_dsytrd: docs/BENCHMARKS.md "Metric kernels").
void householder_tridiagonal(Matrix& A, std::span<double> d, std::span<double> e);

/// The two largest eigenvalues (lambda_1 >= lambda_2) of the symmetric tridiagonal matrix with
/// diagonal d (n) and off-diagonal e (n - 1), by bisection with Sturm counts to ~eps ||T||
/// (as LAPACK's dstebz with abstol = 0); lambda_2 = 0 when n = 1. Without `second` lambda_2 is
/// NaN and not searched for (lambda_1's bisection does not depend on it).
std::pair<double, double> top_two_tridiagonal(std::span<const double> d, std::span<const double> e, bool second = true);

/// Thin SVD A = U diag(s) V^T (dgesdd): U (m x k), s (k, descending), Vt (k x n), k = min(m, n).
struct Svd {
  Matrix U;
  std::vector<double> s;
  Matrix Vt;
};
Svd svd(const Matrix& A);

/// Thin QR of A (m x n, m >= n): returns Q (m x n) with orthonormal columns and the sign fix
/// Q <- Q diag(sign(diag R)), so Q is the unique Haar-distributed factor for Gaussian A.
Matrix thin_q(const Matrix& A);

/// Set the BLAS thread count (OpenBLAS); returns the previous count.
int set_blas_threads(int n);
/// The BLAS in use as "OpenBLAS <version> <core>" (from openblas_get_config / corename).
std::string blas_info();
/// The BLAS kernel that computes, as "OpenBLAS <version> <core>", e.g. "OpenBLAS 0.3.21
/// Cooperlake": results are bitwise reproducible on the same kernel (docs/GUARANTEES.md). The core
/// is what OpenBLAS picked for this CPU, or what OPENBLAS_CORETYPE asked for. With a non-empty
/// blis_range, followed by " + BLIS <version> <configuration> for A B at m n k in (above, up_to],
/// A B^T at ..." (the non-empty ranges; "A B^T" stands for every call with a transpose).
std::string blas_kernel();

}  // namespace rcsweep::linalg
