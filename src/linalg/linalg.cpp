#include "linalg/linalg.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/pow2.hpp"
#include "linalg/blis.hpp"
#include "linalg/lanczos.hpp"

namespace rcsweep::linalg {
namespace {

std::string shape(std::size_t r, std::size_t c) { return std::to_string(r) + "x" + std::to_string(c); }

lapack_int to_lapack(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<lapack_int>::max()))
    throw Error("linalg: dimension " + std::to_string(n) + " exceeds the LAPACK integer range");
  return static_cast<lapack_int>(n);
}

blasint to_blas(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<blasint>::max()))
    throw Error("linalg: dimension " + std::to_string(n) + " exceeds the BLAS integer range");
  return static_cast<blasint>(n);
}

// Numbers of eigenvalues of the tridiagonal (d, e2 = e^2) below each of the points x_p: negative
// pivots of the LDL^T factorisations of T - x_p I. The recurrence is a chain of divisions; the
// points' chains are independent and one AVX2 division serves 4 of them. More points per pass cut
// the passes but cost more per pass (the divider's throughput); 4 points per pass was the fastest
// (bench_kernels BM_top_two_tridiagonal: docs/BENCHMARKS.md "Figures behind choices in the
// source"). The AVX2 and baseline clones give the same counts: every operation
// is a correctly rounded subtraction or division, with nothing to contract into an FMA.
constexpr std::size_t sturm_points = 4;
__attribute__((target_clones("avx2", "default"))) void sturm_counts(const double* d, const double* e2, std::size_t n,
                                                                    double pivmin, const double (&x)[sturm_points],
                                                                    std::size_t (&count)[sturm_points]) {
  double q[sturm_points], c[sturm_points];
  for (std::size_t p = 0; p < sturm_points; ++p) {
    q[p] = d[0] - x[p];
    c[p] = 0.0;
  }
  for (std::size_t i = 0;; ++i) {
    for (std::size_t p = 0; p < sturm_points; ++p) {
      q[p] = std::abs(q[p]) < pivmin ? -pivmin : q[p];
      c[p] += q[p] < 0.0 ? 1.0 : 0.0;
    }
    if (i + 1 == n) break;
    for (std::size_t p = 0; p < sturm_points; ++p) q[p] = d[i + 1] - x[p] - e2[i] / q[p];
  }
  for (std::size_t p = 0; p < sturm_points; ++p) count[p] = static_cast<std::size_t>(c[p]);
}

// One row of the fused pass of householder_tridiagonal: b_c = a_c - (vr w_c + wr v_c) for
// c < len (stored back), and with the next reflector u: returns sum_c b_c u_c and adds b_c ur to
// q_c. Written with 8 independent lanes (and a 4-lane block for the tail) so that the reduction
// vectorises without a loop-carried latency chain (no -ffast-math); the AVX2 and baseline
// clones do the same operations (no FMA to contract), so they give the same results.
__attribute__((target_clones("avx2", "default"))) double fused_row(double* __restrict a, const double* __restrict v,
                                                                   const double* __restrict w,
                                                                   const double* __restrict u, double* __restrict q,
                                                                   double vr, double wr, double ur, std::size_t len) {
  double acc[8] = {}, acc4[4] = {}, tail = 0.0;
  std::size_t c = 0;
  for (; c + 8 <= len; c += 8)
    for (std::size_t l = 0; l < 8; ++l) {
      const double b = a[c + l] - (vr * w[c + l] + wr * v[c + l]);
      a[c + l] = b;
      acc[l] += b * u[c + l];
      q[c + l] += b * ur;
    }
  if (c + 4 <= len) {
    for (std::size_t l = 0; l < 4; ++l) {
      const double b = a[c + l] - (vr * w[c + l] + wr * v[c + l]);
      a[c + l] = b;
      acc4[l] = b * u[c + l];
      q[c + l] += b * ur;
    }
    c += 4;
  }
  for (; c < len; ++c) {
    const double b = a[c] - (vr * w[c] + wr * v[c]);
    a[c] = b;
    tail += b * u[c];
    q[c] += b * ur;
  }
  return (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) +
         (((acc4[0] + acc4[1]) + (acc4[2] + acc4[3])) + tail);
}

}  // namespace

void householder_tridiagonal(Matrix& A, std::span<double> d, std::span<double> e) {
  const std::size_t n = A.rows();
  if (A.cols() != n || d.size() != n || e.size() + 1 != std::max<std::size_t>(n, 1))
    throw Error("householder_tridiagonal: needs a square matrix, n diagonal and n - 1 off-diagonal entries");
  if (n == 0) return;
  // Step j reflects rows/columns j+1.. with H = I - tau u u^T (u_(j+1) = 1, dlarfg's convention)
  // so that row j right of the diagonal becomes (beta, 0, ...). The trailing block B <- H B H is
  // B - v w^T - w v^T (v = u) with p = tau B u, w = p - (tau/2)(p^T u) u. The rank-2 update of
  // step j and the product B u of step j+1 are one pass over the upper triangle (fused_row): it is
  // read and written once per step instead of read twice and written once (dsymv + dsyr2), and
  // every access runs along a row.
  std::vector<double> v(n, 0.0), w(n, 0.0), u(n, 0.0), q(n, 0.0);
  // The reflector of row j right of the diagonal (already updated): into u[j+1..], returns tau;
  // e[j] = beta.
  const auto reflector = [&](std::size_t j) {
    const double* x = A.row(j).data();
    const double alpha = x[j + 1];
    double amax = 0.0;
    for (std::size_t c = j + 2; c < n; ++c) amax = std::max(amax, std::abs(x[c]));
    double xnorm = 0.0;
    if (amax > 0.0) {  // scaled: no overflow or harmful underflow of the squares
      const double inv = 1.0 / amax;
      double ss = 0.0;
      for (std::size_t c = j + 2; c < n; ++c) ss += (x[c] * inv) * (x[c] * inv);
      xnorm = amax * std::sqrt(ss);
    }
    u[j + 1] = 1.0;
    if (xnorm == 0.0) {  // nothing to annihilate: H = I
      for (std::size_t c = j + 2; c < n; ++c) u[c] = 0.0;
      e[j] = alpha;
      return 0.0;
    }
    const double beta = -std::copysign(std::hypot(alpha, xnorm), alpha);
    const double scale = 1.0 / (alpha - beta);
    for (std::size_t c = j + 2; c < n; ++c) u[c] = x[c] * scale;
    e[j] = beta;
    return (beta - alpha) / beta;
  };
  if (n == 1) {
    d[0] = A(0, 0);
    return;
  }
  // p = tau B u for the first step's block (rows/columns 1..), over the upper triangle.
  double tau = reflector(0);
  std::fill(q.begin(), q.end(), 0.0);
  for (std::size_t r = 1; r < n; ++r) {
    const double* a = A.row(r).data();
    double acc = a[r] * u[r];
    for (std::size_t c = r + 1; c < n; ++c) {
      acc += a[c] * u[c];
      q[c] += a[c] * u[r];
    }
    q[r] += acc;
  }
  for (std::size_t r = 1; r < n; ++r) q[r] *= tau;
  for (std::size_t j = 0;; ++j) {
    const std::size_t s = j + 1;  // first row/column of the trailing block
    d[j] = A(j, j);
    // w = p - (tau/2)(p^T u) u; this step's reflector becomes the one being applied (v).
    double pu = 0.0;
    for (std::size_t r = s; r < n; ++r) pu += q[r] * u[r];
    const double half = 0.5 * tau * pu;
    for (std::size_t r = s; r < n; ++r) {
      w[r] = q[r] - half * u[r];
      v[r] = u[r];
    }
    double* as = A.row(s).data();
    if (s + 1 == n) {  // the last 1 x 1 block
      as[s] -= 2.0 * v[s] * w[s];
      d[s] = as[s];
      return;
    }
    // Row s of the updated block, then the next reflector from it.
    for (std::size_t c = s; c < n; ++c) as[c] -= v[s] * w[c] + w[s] * v[c];
    tau = reflector(s);
    // The rest of the update (rows s+1.. of the triangle) fused with p = tau B' u, B' the block
    // from row/column s + 1.
    std::fill(q.begin() + static_cast<std::ptrdiff_t>(s + 1), q.end(), 0.0);
    for (std::size_t r = s + 1; r < n; ++r) {
      double* a = A.row(r).data();
      a[r] -= 2.0 * v[r] * w[r];
      const double acc = fused_row(a + r + 1, v.data() + r + 1, w.data() + r + 1, u.data() + r + 1, q.data() + r + 1,
                                   v[r], w[r], u[r], n - r - 1);
      q[r] += acc + a[r] * u[r];
    }
    for (std::size_t r = s + 1; r < n; ++r) q[r] *= tau;
  }
}

namespace {
double initial_unpacked_gemm_limit() {
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  return core == "skylakex" || core == "cooperlake" || core == "sapphirerapids" ? openblas_unpacked_limit : 0.0;
}
double& unpacked_limit_value() {
  static double limit = initial_unpacked_gemm_limit();
  return limit;
}
BlisRange& blis_range_value() {
  static BlisRange range;
  return range;
}
}  // namespace

BlisRange blis_range() { return blis_range_value(); }

BlisRange set_blis_range(BlisRange range) {
  if (!range.empty() && !blis::available())
    throw Error("linalg::set_blis_range: BLIS is not available (install libblis-dev and configure again)");
  if (range.plain.empty()) range.plain = {};
  if (range.transposed.empty()) range.transposed = {};
  return std::exchange(blis_range_value(), range);
}

namespace {
// One row-major product call: BLIS where blis_range holds its kind and m n k, else OpenBLAS.
void call_dgemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
                std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (blis_range_value().contains(ta || tb, mnk))
    blis::dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n),
                to_blas(k), alpha, a, to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
}
}  // namespace

double unpacked_gemm_limit() { return unpacked_limit_value(); }

double set_unpacked_gemm_limit(double limit) { return std::exchange(unpacked_limit_value(), limit); }

GemmParts gemm_parts(std::size_t m, std::size_t n, std::size_t k, bool transposed, double unpacked_limit,
                     std::size_t split_parts) {
  const double mnk = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool split = 2.0 * mnk >= gemm_split_min_flops;
  if (!split && !transposed && unpacked_limit > 0.0 && mnk > unpacked_limit) {
    const auto fit = static_cast<std::size_t>(unpacked_limit / (static_cast<double>(m) * static_cast<double>(k)));
    const std::size_t piece = fit / 8 * 8;
    if (piece >= gemm_min_piece && piece < n) return {true, {n, piece}};
  }
  const bool columns = split && n > m;
  const std::size_t cut = columns ? n : m;  // the dimension cut into parts (one part when not split)
  if (split && split_parts > 0) {
    const std::size_t even = (cut + split_parts - 1) / split_parts;
    return {columns, {cut, (even + gemm_split_align - 1) / gemm_split_align * gemm_split_align}};
  }
  return {columns, {cut, split && cut >= 2 * gemm_part_size ? gemm_part_size : std::max<std::size_t>(cut, 1)}};
}

void gemm(double alpha, ConstMatrixView A, Op opA, ConstMatrixView B, Op opB, double beta, Matrix& C,
          double unpacked_limit, std::size_t split_parts) {
  const bool ta = opA == Op::trans;
  const bool tb = opB == Op::trans;
  const std::size_t m = ta ? A.cols : A.rows;
  const std::size_t k = ta ? A.rows : A.cols;
  const std::size_t kb = tb ? B.cols : B.rows;
  const std::size_t n = tb ? B.rows : B.cols;
  if (k != kb || C.rows() != m || C.cols() != n)
    throw Error("linalg::gemm: shape mismatch: op(A) " + shape(m, k) + ", op(B) " + shape(kb, n) + ", C " +
                shape(C.rows(), C.cols()));
  if (m == 0 || n == 0) return;
  if (k == 0) {  // op(A) op(B) = 0; BLAS semantics: C is not read when beta == 0
    if (beta == 0.0)
      C.fill(0.0);
    else
      for (double& c : C.values()) c *= beta;
    return;
  }
  // One BLAS call per part of C's rows (or columns), the partition fixed by the shapes and the
  // BLAS kernel (gemm_parts): the threads take the parts, and the bits do not depend on how many
  // there are. Row-major leading dimensions are the row strides (>= the column counts, >= 1 here).
  const GemmParts split = gemm_parts(m, n, k, ta || tb, unpacked_limit, split_parts);
  parallel::for_each(split.parts.count(), [&](std::size_t p) {
    const std::size_t first = split.parts.begin(p), count = split.parts.length(p);
    // Rows [first, first + count) of op(A) (columns of A when transposed) and of C; or columns of
    // op(B) (rows of B when transposed) and of C.
    const double* a = A.data;
    const double* b = B.data;
    double* c = C.data();
    std::size_t mp = m, np = n;
    if (split.columns) {
      b += tb ? first * B.stride : first;
      c += first;
      np = count;
    } else {
      a += ta ? first : first * A.stride;
      c += first * C.cols();
      mp = count;
    }
    call_dgemm(ta, tb, mp, np, k, alpha, a, A.stride, b, B.stride, beta, c, C.cols());
  });
}

parallel::Parts gemv_parts(std::size_t rows, std::size_t cols) {
  if (rows * cols < gemv_split_min_entries || rows < 2 * gemv_part_size) return {rows, std::max<std::size_t>(rows, 1)};
  return {rows, gemv_part_size};
}

void gemv(const Matrix& A, Op op, const double* x, double* y) {
  const std::size_t rows = A.rows(), cols = A.cols();
  if (rows == 0 || cols == 0) {
    std::fill(y, y + (op == Op::none ? rows : cols), 0.0);
    return;
  }
  const parallel::Parts parts = gemv_parts(rows, cols);
  if (parts.count() == 1) {
    cblas_dgemv(CblasRowMajor, op == Op::none ? CblasNoTrans : CblasTrans, to_blas(rows), to_blas(cols), 1.0, A.data(),
                to_blas(cols), x, 1, 0.0, y, 1);
    return;
  }
  // Parts of A's rows, each read once, contiguously. A x: each part gives its rows of y. A^T x:
  // each part p gives A_p^T x_p, and y is their sum in part order (entry by entry, in parts of y).
  if (op == Op::none) {
    parallel::for_each(parts.count(), [&](std::size_t p) {
      const std::size_t first = parts.begin(p);
      cblas_dgemv(CblasRowMajor, CblasNoTrans, to_blas(parts.length(p)), to_blas(cols), 1.0, A.data() + first * cols,
                  to_blas(cols), x, 1, 0.0, y + first, 1);
    });
    return;
  }
  Matrix partial(parts.count(), cols, Matrix::uninitialized);
  parallel::for_each(parts.count(), [&](std::size_t p) {
    const std::size_t first = parts.begin(p);
    cblas_dgemv(CblasRowMajor, CblasTrans, to_blas(parts.length(p)), to_blas(cols), 1.0, A.data() + first * cols,
                to_blas(cols), x + first, 1, 0.0, partial.row(p).data(), 1);
  });
  const parallel::Parts columns{cols, 4096};
  parallel::for_each(columns.count(), [&](std::size_t c) {
    const std::size_t first = columns.begin(c), end = first + columns.length(c);
    std::copy(partial.row(0).data() + first, partial.row(0).data() + end, y + first);
    for (std::size_t p = 1; p < parts.count(); ++p) {
      const double* row = partial.row(p).data();
      for (std::size_t j = first; j < end; ++j) y[j] += row[j];
    }
  });
}

Matrix matmul(const Matrix& A, const Matrix& B, Op opA, Op opB) {
  const std::size_t m = opA == Op::trans ? A.cols() : A.rows();
  const std::size_t n = opB == Op::trans ? B.rows() : B.cols();
  Matrix C(m, n, Matrix::uninitialized);
  gemm(1.0, A, opA, B, opB, 0.0, C);
  return C;
}

namespace {

// A matrix whose long side is at least twice its short side k (qr_first) gives its singular
// values as those of R, the k x k triangle of a QR factorisation of its long view (A itself when
// tall, A^T when wide). The long view's rows are cut into blocks fixed by the shape
// (qr_first_blocks, each of at least 2k rows), each block's R comes from dgeqrf on the rank's
// threads, and a binary tree of dtpqrt merges them (tall-skinny QR); dgesdd then takes the k x k
// R. Bitwise the same on any number of threads. Faster than dgesdd on A even on one thread: a
// row-major tall A is a wide matrix to LAPACK, which then reduces it by LQ, more slowly than by QR
// (bench_kernels BM_singular_values, docs/BENCHMARKS.md "Metric kernels").
constexpr lapack_int tpqrt_block = 32;

// Rows [r0, r0 + b) of the long view of A as a column-major b x k block (leading dimension b);
// returns their largest |entry|, NaN when an entry is not finite (as metrics::finite_max_abs,
// here within the copy).
double long_view_rows(const Matrix& A, std::size_t r0, std::size_t b, double* c) {
  double mx = 0.0;
  bool finite = true;
  const auto take = [&](double x) {
    const double a = std::abs(x);
    mx = std::max(mx, a);
    finite &= a <= std::numeric_limits<double>::max();  // false for inf and NaN
  };
  if (A.rows() >= A.cols()) {  // tall: rows of A, transposed into columns
    const std::size_t k = A.cols();
    for (std::size_t i = 0; i < b; ++i) {
      const double* row = A.row(r0 + i).data();
      for (std::size_t j = 0; j < k; ++j) {
        c[j * b + i] = row[j];
        take(row[j]);
      }
    }
  } else {  // wide: columns r0.. of A, one contiguous stretch of each row
    for (std::size_t j = 0; j < A.rows(); ++j) {
      const double* row = A.row(j).data() + r0;
      std::copy_n(row, b, c + j * b);
      for (std::size_t i = 0; i < b; ++i) take(row[i]);
    }
  }
  return finite ? mx : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> singular_values_of_r(const Matrix& A) {
  const std::size_t k = std::min(A.rows(), A.cols()), n = std::max(A.rows(), A.cols());
  const std::size_t count = qr_first_blocks(k, n);
  const parallel::Parts blocks{n, (n + count - 1) / count};
  const lapack_int lk = to_lapack(k);
  std::vector<std::vector<double>> c(count);  // the blocks, column-major
  std::vector<double> block_max(count);
  parallel::for_each(count, [&](std::size_t p) {
    c[p].resize(blocks.length(p) * k);
    block_max[p] = long_view_rows(A, blocks.begin(p), blocks.length(p), c[p].data());
  });
  if (std::any_of(block_max.begin(), block_max.end(), [](double m) { return std::isnan(m); }))
    throw Error("linalg::singular_values: the matrix has non-finite entries");
  const double amax = *std::max_element(block_max.begin(), block_max.end());
  // Far from 1 (where dgesdd would scale too) the blocks are scaled by a power of two, exactly.
  int shift = 0;
  if (amax > 0x1p500 || (amax > 0.0 && amax < 0x1p-500)) std::frexp(amax, &shift);
  std::vector<std::vector<double>> R(count, std::vector<double>(k * k, 0.0));  // column-major, upper
  parallel::for_each(count, [&](std::size_t p) {
    const std::size_t b = blocks.length(p);
    if (shift != 0) scale_pow2(c[p], c[p], -shift);
    std::vector<double> tau(k);
    const lapack_int info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, to_lapack(b), lk, c[p].data(), to_lapack(b), tau.data());
    if (info != 0) throw LinalgError("dgeqrf", info);
    for (std::size_t j = 0; j < k; ++j) std::copy_n(c[p].data() + j * b, j + 1, R[p].data() + j * k);
    c[p] = {};
  });
  // Level by level: R[p] <- R of [R[p]; R[p + step]] (dtpqrt leaves the strictly lower part of
  // R[p] untouched, i.e. zero).
  const lapack_int nb = std::min(tpqrt_block, lk);
  for (std::size_t step = 1; step < count; step *= 2) {
    parallel::for_each((count + step - 1) / (2 * step), [&](std::size_t q) {  // pairs at this level
      const std::size_t p = q * 2 * step;
      std::vector<double> t(static_cast<std::size_t>(nb) * k);
      const lapack_int info = LAPACKE_dtpqrt(LAPACK_COL_MAJOR, lk, lk, lk, nb, R[p].data(), lk, R[p + step].data(), lk,
                                             t.data(), nb);
      if (info != 0) throw LinalgError("dtpqrt", info);
    });
  }
  std::vector<double> s(k);
  const lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', lk, lk, R[0].data(), lk, s.data(), nullptr, 1, nullptr,
                                         1);
  if (info != 0) throw LinalgError("dgesdd", info);
  if (shift != 0) scale_pow2(s, s, shift);
  return s;
}

}  // namespace

std::vector<double> singular_values(const Matrix& A) {
  const std::size_t m = A.rows();
  const std::size_t n = A.cols();
  const std::size_t k = std::min(m, n);
  if (qr_first(k, std::max(m, n))) return singular_values_of_r(A);
  std::vector<double> s(k);
  if (s.empty()) return s;
  // Row-major A (m x n) is column-major A^T (n x m): same singular values, and LAPACKE needs no
  // transposed copy.
  Matrix a = A;
  const lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', to_lapack(n), to_lapack(m), a.data(), to_lapack(n),
                                         s.data(), nullptr, 1, nullptr, 1);
  if (info != 0) throw LinalgError("dgesdd", info);
  return s;
}

std::vector<std::complex<double>> eigenvalues(const Matrix& A) {
  const std::size_t n = A.rows();
  if (A.cols() != n) throw Error("linalg::eigenvalues: needs a square matrix, got " + shape(n, A.cols()));
  if (!std::all_of(A.values().begin(), A.values().end(), [](double x) { return std::isfinite(x); }))
    throw Error("linalg::eigenvalues: the matrix has non-finite entries");
  std::vector<std::complex<double>> out(n);
  if (n == 0) return out;
  // Row-major A is column-major A^T, which has the same eigenvalues: no transposed copy.
  Matrix a = A;
  std::vector<double> wr(n), wi(n);
  double dummy = 0.0;
  const lapack_int ln = to_lapack(n);
  const lapack_int info = LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'N', ln, a.data(), ln, wr.data(), wi.data(), &dummy, 1,
                                        &dummy, 1);
  if (info != 0) throw LinalgError("dgeev", info);
  for (std::size_t i = 0; i < n; ++i) out[i] = {wr[i], wi[i]};
  // Finite input gives finite eigenvalues, so this is a strict weak order.
  std::sort(out.begin(), out.end(), [](const std::complex<double>& x, const std::complex<double>& y) {
    const double ax = std::abs(x), ay = std::abs(y);
    if (ax != ay) return ax > ay;
    if (x.real() != y.real()) return x.real() > y.real();
    return x.imag() > y.imag();
  });
  return out;
}

// The upper triangle of G = alpha A A^T (rows) or alpha A^T A, k x k. Small: one dsyrk, or where
// the BLAS multiplies small products unpacked (unpacked_gemm_limit) and a piece of gram_piece
// columns fits its limit, the column pieces G[0:end, piece] = R[0:end, :] R^T[:, piece] of the
// k x inner factor R (A, or A^T) and its transpose (one copy), each one unpacked GEMM without
// transposes: faster than the dsyrk at the Mind the Gap grid's shapes (docs/BENCHMARKS.md
// "Products cut for the unpacked kernels"), though they also compute the lower halves of the
// diagonal blocks. From gram_split_min_order on (with enough work to share), in column parts of
// gram_part_size, each the rectangle G[0:end, part] = one GEMM, on the rank's threads (largest
// first). Every partition is fixed by the shapes and the BLAS kernel, so G is bitwise the same on
// any number of threads.
void gram_upper(const Matrix& A, double alpha, bool rows, Matrix& G) {
  const std::size_t k = G.rows(), inner = rows ? A.cols() : A.rows(), lda = A.cols();
  const double work = static_cast<double>(k) * static_cast<double>(k) * static_cast<double>(inner);
  if (k < gram_split_min_order || work < gemm_split_min_flops) {
    const double limit = unpacked_gemm_limit();
    if (limit > 0.0 && static_cast<double>(k) * static_cast<double>(gram_piece) * static_cast<double>(inner) <= limit) {
      Matrix At(A.cols(), A.rows(), Matrix::uninitialized);  // OpenBLAS's transposing copy: faster than a plain loop
      cblas_domatcopy(CblasRowMajor, CblasTrans, to_blas(A.rows()), to_blas(A.cols()), 1.0, A.data(), to_blas(lda),
                      At.data(), to_blas(A.rows()));
      const Matrix& R = rows ? A : At;   // k x inner
      const Matrix& Rt = rows ? At : A;  // inner x k
      for (std::size_t first = 0; first < k; first += gram_piece) {
        const std::size_t count = std::min(gram_piece, k - first), end = first + count;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blas(end), to_blas(count), to_blas(inner), alpha,
                    R.data(), to_blas(inner), Rt.data() + first, to_blas(k), 0.0, G.data() + first, to_blas(k));
      }
      return;
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, rows ? CblasNoTrans : CblasTrans, to_blas(k), to_blas(inner), alpha,
                A.data(), to_blas(lda), 0.0, G.data(), to_blas(k));
    return;
  }
  const parallel::Parts parts{k, gram_part_size};
  parallel::for_each(parts.count(), [&](std::size_t p) {
    const std::size_t part = parts.count() - 1 - p;  // the tallest rectangles first
    const std::size_t first = parts.begin(part), count = parts.length(part), end = first + count;
    // rows: G[0:end, first:end] = A[0:end, :] A[first:end, :]^T; else A[:, 0:end]^T A[:, first:end].
    if (rows)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, to_blas(end), to_blas(count), to_blas(inner), alpha,
                  A.data(), to_blas(lda), A.data() + first * lda, to_blas(lda), 0.0, G.data() + first, to_blas(k));
    else
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, to_blas(end), to_blas(count), to_blas(inner), alpha,
                  A.data(), to_blas(lda), A.data() + first, to_blas(lda), 0.0, G.data() + first, to_blas(k));
  });
}

GramTop gram_top(const Matrix& A, double alpha, double decline_below, bool second) {
  const std::size_t m = A.rows();
  const std::size_t n = A.cols();
  const std::size_t k = std::min(m, n);
  GramTop r;
  if (k == 0) return r;
  // G = A A^T (m <= n) or A^T A (m > n): k x k, lower triangle, by dsyrk at GEMM speed.
  Matrix G(k, k, Matrix::uninitialized);  // only the upper triangle is written and read
  const bool rows = m <= n;
  gram_upper(A, alpha, rows, G);
  // trace and ||G||_F^2 = sum_i g_ii^2 + 2 sum_(j > i) g_ij^2; the off-diagonal sum in 4
  // independent partial sums (no loop-carried latency chain, which dominated the call's time).
  double off[4] = {0.0, 0.0, 0.0, 0.0};
  for (std::size_t i = 0; i < k; ++i) {
    const double* g = G.row(i).data();
    r.trace += g[i];
    r.fro2 += g[i] * g[i];
    std::size_t j = i + 1;
    for (; j + 4 <= k; j += 4)
      for (std::size_t l = 0; l < 4; ++l) off[l] += g[j + l] * g[j + l];
    for (; j < k; ++j) off[0] += g[j] * g[j];
  }
  r.fro2 += 2.0 * ((off[0] + off[1]) + (off[2] + off[3]));
  // lambda_1 >= fro2 / trace (sum l^2 <= l_1 sum l) and lambda_2^2 <= fro2 - lambda_1^2: when these
  // bounds already prove lambda_2 < decline_below * lambda_1, the eigensolve is skipped. The slack
  // covers the rounding of fro2 and trace (relative ~k eps, so ~sqrt(k eps) on the bound).
  if (decline_below > 0.0 && r.trace > 0.0) {
    const double l1_low = r.fro2 / r.trace;
    const double slack = std::sqrt(64.0 * static_cast<double>(k) * std::numeric_limits<double>::epsilon());
    const double l2_high = std::sqrt(std::max(0.0, r.fro2 - l1_low * l1_low)) + slack * std::sqrt(r.fro2);
    if (l2_high < decline_below * l1_low) {
      r.solved = false;
      return r;
    }
  }
  // lambda_1 alone of a nearly rank-one G (a collapsed signal): Lanczos with the quadratic bound
  // finds it in a few steps; elsewhere it gives up after 3 and the tridiagonalisation decides.
  if (!second && k >= gram_psd_lanczos_min_order && k < gram_lanczos_min_order) {
    const TopSingular top = top_eigenvalue_psd(G, r.trace, r.fro2, 1e-13, gram_psd_lanczos_steps);
    if (top.converged) {
      r.lambda1 = top.s1;
      r.lambda2 = std::numeric_limits<double>::quiet_NaN();
      return r;
    }
  }
  // Large k: symmetric Lanczos on G, certified to 1e-13 relative; cheaper than the
  // tridiagonalisation from k = gram_lanczos_min_order on (measured, bench/bench_metrics.cpp).
  // When it does not converge quickly, the tridiagonalisation decides.
  if (k >= gram_lanczos_min_order) {
    const TopSingular top = top_eigenvalues(G, 1e-13, 200);
    if (top.converged) {
      r.lambda1 = top.s1;
      r.lambda2 = top.s2;
      return r;
    }
  }
  // Only the two largest eigenvalues: Householder tridiagonalisation (dsytrd), then bisection
  // with Sturm counts for the two of the tridiagonal T (top_two_tridiagonal). LAPACK's dsyevx
  // does the same, but its bisection (dstebz, with a function call per NaN check) and its dsytrd
  // are slower at the grids' orders than these (docs/BENCHMARKS.md "Metric kernels").
  std::vector<double> d(k), e(k - 1);
  householder_tridiagonal(G, d, e);
  const auto [l1, l2] = top_two_tridiagonal(d, e, second);
  r.lambda1 = std::max(l1, 0.0);
  r.lambda2 = !second ? l2 : k >= 2 ? std::max(l2, 0.0) : 0.0;  // l2 NaN without `second`
  return r;
}

std::pair<double, double> top_two_tridiagonal(std::span<const double> d_in, std::span<const double> e_in, bool second) {
  const std::size_t n = d_in.size();
  const double no_l2 = second ? 0.0 : std::numeric_limits<double>::quiet_NaN();  // for T empty or zero
  if (n == 0) return {0.0, no_l2};
  if (e_in.size() + 1 != n) throw Error("top_two_tridiagonal: needs n - 1 off-diagonal entries");
  // Scale by a power of two to max entry ~1 (exact), so that e^2 neither under- nor overflows.
  double amax = 0.0;
  for (double x : d_in) amax = std::max(amax, std::abs(x));
  for (double x : e_in) amax = std::max(amax, std::abs(x));
  if (amax == 0.0) return {0.0, no_l2};
  int ex = 0;
  std::frexp(amax, &ex);
  std::vector<double> d(n), e(n - 1);
  for (std::size_t i = 0; i < n; ++i) d[i] = std::ldexp(d_in[i], -ex);
  for (std::size_t i = 0; i + 1 < n; ++i) e[i] = std::ldexp(e_in[i], -ex);
  // Gershgorin interval and the pivot floor of LAPACK's dstebz (pivmin = safmin max(1, max e^2)).
  double lo = d[0], hi = d[0], emax2 = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = (i > 0 ? std::abs(e[i - 1]) : 0.0) + (i + 1 < n ? std::abs(e[i]) : 0.0);
    lo = std::min(lo, d[i] - r);
    hi = std::max(hi, d[i] + r);
    if (i + 1 < n) emax2 = std::max(emax2, e[i] * e[i]);
  }
  const double pivmin = std::numeric_limits<double>::min() * std::max(1.0, emax2);
  const double eps = std::numeric_limits<double>::epsilon();
  const double norm = std::max(std::abs(lo), std::abs(hi));
  lo -= 2.0 * eps * norm + pivmin;
  hi += 2.0 * eps * norm + pivmin;
  std::vector<double> e2(n - 1);
  for (std::size_t i = 0; i + 1 < n; ++i) e2[i] = e[i] * e[i];
  constexpr std::size_t points = sturm_points;
  const auto below = [&](const double(&x)[points], std::size_t(&count)[points]) {
    sturm_counts(d.data(), e2.data(), n, pivmin, x, count);
  };
  // The j-th smallest eigenvalue (1-based) lies in [a, b] while below(a) < j <= below(b):
  // multisection (the interval shrinks (points + 1)-fold per pass) down to the accuracy of
  // bisection, ~eps ||T||, as dstebz with abstol = 0. The counts of lambda_1's passes also narrow
  // lambda_2's interval [a2, b2].
  double a2 = lo, b2 = hi;
  const auto eigenvalue = [&](std::size_t j, double a, double b) {
    const double tol = 2.0 * eps * norm + pivmin;
    double x[points];
    std::size_t count[points];
    while (b - a > tol + 2.0 * eps * std::max(std::abs(a), std::abs(b))) {
      const double h = (b - a) / (points + 1);
      for (std::size_t p = 0; p < points; ++p) x[p] = a + h * static_cast<double>(p + 1);
      if (!(x[0] > a) || !(x[points - 1] < b)) break;  // no representable point inside
      below(x, count);
      for (std::size_t p = 0; p < points; ++p) {
        if (count[p] + 1 < n)  // two or more eigenvalues above x[p]
          a2 = std::max(a2, x[p]);
        else
          b2 = std::min(b2, x[p]);
      }
      double na = a, nb = b;
      for (std::size_t p = 0; p < points; ++p) {
        if (count[p] >= j) {
          nb = x[p];
          break;
        }
        na = x[p];
      }
      a = na;
      b = nb;
    }
    return 0.5 * (a + b);
  };
  const double l1 = eigenvalue(n, lo, hi);
  if (!second) return {std::ldexp(l1, ex), std::numeric_limits<double>::quiet_NaN()};
  const double l2 = n >= 2 ? eigenvalue(n - 1, a2, std::min(b2, l1 + 2.0 * eps * norm + pivmin)) : 0.0;
  return {std::ldexp(l1, ex), std::ldexp(l2, ex)};
}

Svd svd(const Matrix& A) {
  const std::size_t m = A.rows(), n = A.cols(), k = std::min(m, n);
  Svd r{Matrix(m, k), std::vector<double>(k), Matrix(k, n)};
  if (k == 0) return r;
  Matrix a = A;
  const lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', to_lapack(m), to_lapack(n), a.data(), to_lapack(n),
                                         r.s.data(), r.U.data(), to_lapack(k), r.Vt.data(), to_lapack(n));
  if (info != 0) throw LinalgError("dgesdd", info);
  return r;
}

Matrix thin_q(const Matrix& A) {
  const std::size_t m = A.rows();
  const std::size_t n = A.cols();
  if (m < n) throw Error("linalg::thin_q: needs rows >= cols, got " + shape(m, n));
  Matrix q = A;
  if (n == 0) return q;
  const lapack_int lm = to_lapack(m);
  const lapack_int ln = to_lapack(n);
  std::vector<double> tau(n);
  lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, lm, ln, q.data(), ln, tau.data());
  if (info != 0) throw LinalgError("dgeqrf", info);
  // R is in the upper triangle now; keep the signs of its diagonal before dorgqr overwrites it.
  std::vector<double> sign(n);
  for (std::size_t j = 0; j < n; ++j) sign[j] = q(j, j) < 0.0 ? -1.0 : 1.0;  // sign(0) = +1
  info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, lm, ln, ln, q.data(), ln, tau.data());
  if (info != 0) throw LinalgError("dorgqr", info);
  // Q <- Q diag(sign(diag R)): makes diag(R) positive, the unique (Haar) factor (Mezzadri 2007).
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) q(i, j) *= sign[j];
  return q;
}

int set_blas_threads(int n) {
  if (n < 1) throw Error("linalg::set_blas_threads: thread count must be >= 1, got " + std::to_string(n));
  const int previous = openblas_get_num_threads();
  openblas_set_num_threads(n);
  return previous;
}

std::string blas_info() {
  // openblas_get_config() already starts with "OpenBLAS <version>" in current releases.
  std::string config = openblas_get_config();
  constexpr std::string_view prefix = "OpenBLAS ";
  if (!config.starts_with(prefix)) config.insert(0, prefix);
  return config + " core " + openblas_get_corename();
}

std::string blas_kernel() {
  // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."; its second word is the version.
  const std::string config = openblas_get_config();
  std::string version;
  if (const auto space = config.find(' '); config.starts_with("OpenBLAS ") && space != std::string::npos)
    version = config.substr(space + 1, config.find(' ', space + 1) - space - 1);
  std::string kernel = "OpenBLAS " + (version.empty() ? std::string("?") : version) + " " + openblas_get_corename();
  if (const BlisRange r = blis_range(); !r.empty()) {
    const auto mnk = [](double v) { return v >= 1e300 ? std::string("inf") : std::to_string(std::llround(v)); };
    const auto range = [&](const char* kind, MnkRange m) {
      return m.empty() ? std::string()
                       : std::string(kind) + " at m n k in (" + mnk(m.above) + ", " + mnk(m.up_to) + "]";
    };
    const std::string plain = range("A B", r.plain), transposed = range("A B^T", r.transposed);
    kernel += " + " + blis::kernel() + " for " + plain + (plain.empty() || transposed.empty() ? "" : ", ") + transposed;
  }
  return kernel;
}

}  // namespace rcsweep::linalg
