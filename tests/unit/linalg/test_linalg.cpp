// linalg: BLAS/LAPACK wrappers against naive references and closed forms.
#include <cblas.h>
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "base/exp.hpp"
#include "base/parallel.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::linalg {
namespace {

Matrix random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Matrix a(m, n);
  for (double& x : a.values()) x = dist(gen);
  return a;
}

Matrix naive_transpose(const Matrix& a) {
  Matrix t(a.cols(), a.rows());
  for (std::size_t i = 0; i < a.rows(); ++i)
    for (std::size_t j = 0; j < a.cols(); ++j) t(j, i) = a(i, j);
  return t;
}

Matrix naive_mul(const Matrix& a, const Matrix& b) {
  Matrix c(a.rows(), b.cols());
  for (std::size_t i = 0; i < a.rows(); ++i)
    for (std::size_t j = 0; j < b.cols(); ++j) {
      double s = 0.0;
      for (std::size_t l = 0; l < a.cols(); ++l) s += a(i, l) * b(l, j);
      c(i, j) = s;
    }
  return c;
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a.values()[i] - b.values()[i]));
  return d;
}

double fro2(const Matrix& a) {
  double s = 0.0;
  for (double x : a.values()) s += x * x;
  return s;
}

// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations (test reference only).
std::vector<double> jacobi_eigenvalues(Matrix a) {
  const std::size_t n = a.rows();
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) off += a(p, q) * a(p, q);
    if (off < 1e-30 * fro2(a)) break;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        if (a(p, q) == 0.0) continue;
        const double theta = (a(q, q) - a(p, p)) / (2.0 * a(p, q));
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0);
        const double s = t * c;
        for (std::size_t k = 0; k < n; ++k) {  // A <- A J
          const double akp = a(k, p), akq = a(k, q);
          a(k, p) = c * akp - s * akq;
          a(k, q) = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < n; ++k) {  // A <- J^T A
          const double apk = a(p, k), aqk = a(q, k);
          a(p, k) = c * apk - s * aqk;
          a(q, k) = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> ev(n);
  for (std::size_t i = 0; i < n; ++i) ev[i] = a(i, i);
  std::sort(ev.rbegin(), ev.rend());
  return ev;
}

double det_lu(Matrix a) {  // Gaussian elimination with partial pivoting
  const std::size_t n = a.rows();
  double det = 1.0;
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(a(r, c)) > std::abs(a(piv, c))) piv = r;
    if (piv != c) {
      for (std::size_t j = 0; j < n; ++j) std::swap(a(c, j), a(piv, j));
      det = -det;
    }
    det *= a(c, c);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a(r, c) / a(c, c);
      for (std::size_t j = c; j < n; ++j) a(r, j) -= f * a(c, j);
    }
  }
  return det;
}

TEST(LinalgGemm, AllOpCombinationsMatchNaiveTripleLoop) {
  const std::size_t m = 5, k = 7, n = 3;
  const double alpha = -1.75, beta = 0.625;
  unsigned seed = 1;
  for (Op opa : {Op::none, Op::trans})
    for (Op opb : {Op::none, Op::trans}) {
      const Matrix a = opa == Op::none ? random_matrix(m, k, seed++) : random_matrix(k, m, seed++);
      const Matrix b = opb == Op::none ? random_matrix(k, n, seed++) : random_matrix(n, k, seed++);
      const Matrix c0 = random_matrix(m, n, seed++);
      Matrix c = c0;
      gemm(alpha, a, opa, b, opb, beta, c);
      Matrix ref = naive_mul(opa == Op::none ? a : naive_transpose(a), opb == Op::none ? b : naive_transpose(b));
      for (std::size_t i = 0; i < ref.size(); ++i) ref.values()[i] = alpha * ref.values()[i] + beta * c0.values()[i];
      EXPECT_LT(max_abs_diff(c, ref), 1e-13) << "opA " << int(opa) << " opB " << int(opb);

      const Matrix p = matmul(a, b, opa, opb);
      const Matrix pref = naive_mul(opa == Op::none ? a : naive_transpose(a), opb == Op::none ? b : naive_transpose(b));
      EXPECT_LT(max_abs_diff(p, pref), 1e-13);
    }
}

TEST(LinalgGemm, BetaZeroIgnoresNaNInC) {
  const Matrix a = random_matrix(4, 6, 11), b = random_matrix(6, 2, 12);
  Matrix c(4, 2, std::numeric_limits<double>::quiet_NaN());
  gemm(1.0, a, Op::none, b, Op::none, 0.0, c);
  EXPECT_LT(max_abs_diff(c, naive_mul(a, b)), 1e-13);
}

TEST(LinalgGemm, ShapeMismatchThrows) {
  const Matrix a(3, 4), b(5, 2);
  Matrix c(3, 2);
  EXPECT_THROW(gemm(1.0, a, Op::none, b, Op::none, 0.0, c), Error);  // inner 4 vs 5
  Matrix wrong(2, 3);
  const Matrix b2(4, 2);
  EXPECT_THROW(gemm(1.0, a, Op::none, b2, Op::none, 0.0, wrong), Error);  // C must be 3x2
  EXPECT_NO_THROW(gemm(1.0, a, Op::none, b2, Op::none, 0.0, c));
  EXPECT_THROW(matmul(a, a), Error);
  EXPECT_NO_THROW(matmul(a, a, Op::none, Op::trans));
}

// gemm's opt-in split_parts: above gemm_split_min_flops at most that many parts along the default's
// dimension, each a multiple of gemm_split_align but the last, covering C exactly once; below the
// threshold, and with split_parts = 0, the default partition.
TEST(LinalgGemmSplitParts, CoverCInAtMostThatManyAlignedParts) {
  struct Shape {
    std::size_t m, n, k;
  };
  for (const Shape sh : {Shape{512, 5120, 2560}, Shape{512, 5456, 2560}, Shape{512, 2560, 5120}, Shape{1000, 800, 800},
                         Shape{300, 1100, 2048}, Shape{2048, 17, 4096}, Shape{700, 699, 699}})
    for (const std::size_t parts : {1u, 2u, 3u, 4u, 7u, 8u, 64u, 5000u}) {
      const GemmParts d = gemm_parts(sh.m, sh.n, sh.k, false, 0.0);
      const GemmParts p = gemm_parts(sh.m, sh.n, sh.k, false, 0.0, parts);
      ASSERT_GE(2.0 * static_cast<double>(sh.m * sh.n * sh.k), gemm_split_min_flops);
      EXPECT_EQ(p.columns, d.columns) << sh.m << " x " << sh.n << " x " << sh.k;
      const std::size_t cut = p.columns ? sh.n : sh.m;
      EXPECT_EQ(p.parts.n, cut);
      EXPECT_LE(p.parts.count(), parts);
      EXPECT_GE(p.parts.count(), 1u);
      std::size_t covered = 0;
      for (std::size_t i = 0; i < p.parts.count(); ++i) {
        EXPECT_EQ(p.parts.begin(i), covered);
        EXPECT_GT(p.parts.length(i), 0u);
        if (i + 1 < p.parts.count()) {
          EXPECT_EQ(p.parts.length(i) % gemm_split_align, 0u);
        }
        covered += p.parts.length(i);
      }
      EXPECT_EQ(covered, cut) << sh.m << " x " << sh.n << " x " << sh.k << ", " << parts << " parts";
      // The shapes alone: the same partition whatever the threads.
      parallel::set_threads(3);
      const GemmParts again = gemm_parts(sh.m, sh.n, sh.k, false, 0.0, parts);
      parallel::set_threads(1);
      EXPECT_EQ(again.parts.size, p.parts.size);
    }
  EXPECT_EQ(gemm_parts(512, 5120, 2560, false, 0.0, 4).parts.size, 1280u);
  EXPECT_EQ(gemm_parts(512, 5456, 2560, false, 0.0, 4).parts.size, 1368u);
  EXPECT_EQ(gemm_parts(512, 5456, 2560, false, 0.0, 4).parts.count(), 4u);
  // split_parts = 0 is the default partition; under the threshold one call either way.
  EXPECT_EQ(gemm_parts(512, 5120, 2560, false, 0.0, 0).parts.size, gemm_part_size);
  EXPECT_EQ(gemm_parts(150, 750, 750, false, 0.0, 4).parts.count(), 1u);
  EXPECT_EQ(gemm_parts(150, 150, 150, false, openblas_unpacked_limit, 4).parts.size,
            gemm_parts(150, 150, 150, false, openblas_unpacked_limit).parts.size);
}

// gemm with split_parts: the naive product within rounding, and the same bits on 1, 2 and 3
// threads, for every op and both split directions.
TEST(LinalgGemmSplitParts, BitwiseTheSameOnAnyThreadCount) {
  struct Case {
    std::size_t m, n, k;
    Op opa, opb;
  };
  unsigned seed = 900;
  for (const Case c : {Case{96, 1000, 1500, Op::none, Op::none}, Case{1000, 96, 1500, Op::none, Op::none},
                       Case{96, 1000, 1500, Op::trans, Op::none}, Case{1000, 96, 1500, Op::none, Op::trans},
                       Case{600, 601, 400, Op::trans, Op::trans}})
    for (const std::size_t parts : {2u, 3u, 4u}) {
      const Matrix a = c.opa == Op::none ? random_matrix(c.m, c.k, seed++) : random_matrix(c.k, c.m, seed++);
      const Matrix b = c.opb == Op::none ? random_matrix(c.k, c.n, seed++) : random_matrix(c.n, c.k, seed++);
      const Matrix c0 = random_matrix(c.m, c.n, seed++);
      ASSERT_GT(gemm_parts(c.m, c.n, c.k, true, 0.0, parts).parts.count(), 1u);
      Matrix reference;
      for (const int threads : {1, 2, 3}) {
        parallel::set_threads(threads);
        Matrix out = c0;
        gemm(0.75, a, c.opa, b, c.opb, -1.5, out, 0.0, parts);
        parallel::set_threads(1);
        if (threads == 1) {
          reference = out;
          const Matrix ab = naive_mul(c.opa == Op::none ? a : naive_transpose(a),
                                      c.opb == Op::none ? b : naive_transpose(b));
          double err = 0.0;
          for (std::size_t i = 0; i < ab.size(); ++i)
            err = std::max(err, std::abs(out.values()[i] - (0.75 * ab.values()[i] - 1.5 * c0.values()[i])));
          EXPECT_LT(err, 1e-11) << c.m << " x " << c.n << " x " << c.k << ", " << parts << " parts";
        } else {
          EXPECT_EQ(std::memcmp(out.data(), reference.data(), out.size() * sizeof(double)), 0)
              << c.m << " x " << c.n << " x " << c.k << ", " << parts << " parts, " << threads << " threads";
        }
      }
    }
}

// The bits of a BLAS or LAPACK result must not depend on where its operands live: a task's
// matrices sit at heap addresses that depend on what else was allocated (which tasks share its
// bundle, which ran before). Every routine rcsweep calls, on the same values placed at 0, 16, 32
// and 48 bytes past a 64-byte boundary (glibc's heap aligns every block to 16 bytes), at sizes on both sides of OpenBLAS's
// small-matrix paths and with odd tails. At 8 bytes past a 16-byte boundary, which no heap block
// has, OpenBLAS 0.3.21's dgemv, ddot and dgesdd give other bits under its Sandybridge, Prescott,
// Core2, Penryn, Dunnington, Barcelona, Bobcat and Nano kernels (measured). bench/check_kernels.sh
// runs this under every OPENBLAS_CORETYPE the CPU supports.
TEST(LinalgPlacement, ResultsDoNotDependOnOperandAlignment) {
  const int previous = set_blas_threads(1);
  // Runs `f` on copies of `inputs` placed at `offset` doubles past a 64-byte boundary; returns
  // the raw bytes of what it wrote to its outputs (given sizes).
  using Routine = std::function<void(std::vector<double*>&)>;
  const auto placed = [](const std::vector<std::vector<double>>& inputs, std::size_t offset, const Routine& f) {
    std::vector<std::vector<double>> storage;
    std::vector<double*> ptr;
    for (const auto& in : inputs) {
      storage.emplace_back(in.size() + 16);
      const auto misalign = reinterpret_cast<std::uintptr_t>(storage.back().data()) % 64 / sizeof(double);
      double* at = storage.back().data() + (8 - misalign) % 8 + offset;  // 64-byte boundary + offset
      std::copy(in.begin(), in.end(), at);
      ptr.push_back(at);
    }
    f(ptr);
    std::vector<double> out;
    for (std::size_t i = 0; i < inputs.size(); ++i) out.insert(out.end(), ptr[i], ptr[i] + inputs[i].size());
    return out;
  };
  const auto values = [](std::size_t n, unsigned seed) {
    const Matrix m = random_matrix(n, 1, seed);
    return std::vector<double>(m.values().begin(), m.values().end());
  };
  for (const std::size_t n : {std::size_t{7}, std::size_t{37}, std::size_t{150}, std::size_t{301}}) {
    const auto A = values(n * n, 1), B = values(n * n, 2), x = values(n, 3), y = values(n, 4);
    const int N = static_cast<int>(n);
    const std::vector<std::pair<const char*, std::pair<std::vector<std::vector<double>>, Routine>>> routines = {
        {"dgemm",
         {{A, B, std::vector<double>(n * n)},
          [&](auto& p) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, p[0], N, p[1], N, 0.0, p[2], N);
          }}},
        {"dgemm NT",
         {{A, B, std::vector<double>(n * n)},
          [&](auto& p) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N - 3, N, N - 1, 0.5, p[0], N, p[1], N, 0.0, p[2], N);
          }}},
        {"dsyrk",
         {{A, std::vector<double>(n * n)},
          [&](auto& p) { cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, N, N, 1.0, p[0], N, 0.0, p[1], N); }}},
        {"dgemv",
         {{A, x, y},
          [&](auto& p) { cblas_dgemv(CblasRowMajor, CblasNoTrans, N, N, 1.0, p[0], N, p[1], 1, 0.0, p[2], 1); }}},
        {"dgemv T",
         {{A, x, y},
          [&](auto& p) { cblas_dgemv(CblasRowMajor, CblasTrans, N, N, 1.0, p[0], N, p[1], 1, 0.5, p[2], 1); }}},
        {"dsymv",
         {{A, x, y}, [&](auto& p) { cblas_dsymv(CblasRowMajor, CblasUpper, N, 1.0, p[0], N, p[1], 1, 0.0, p[2], 1); }}},
        {"ddot dnrm2 daxpy",
         {{x, y, {0.0, 0.0}},
          [&](auto& p) {
            p[2][0] = cblas_ddot(N, p[0], 1, p[1], 1);
            p[2][1] = cblas_dnrm2(N, p[0], 1);
            cblas_daxpy(N, 0.3, p[0], 1, p[1], 1);
          }}},
        {"dgesdd",
         {{A, std::vector<double>(n)},
          [&](auto& p) {
            ASSERT_EQ(LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', N, N, p[0], N, p[1], nullptr, 1, nullptr, 1), 0);
          }}},
    };
    for (const auto& [name, routine] : routines) {
      const auto& [inputs, f] = routine;
      const std::vector<double> ref = placed(inputs, 0, f);
      for (std::size_t offset = 2; offset < 8; offset += 2) {
        const std::vector<double> got = placed(inputs, offset, f);
        ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(double)), 0)
            << name << " n " << n << " offset " << offset << " doubles, kernel " << blas_info();
      }
    }
  }
  set_blas_threads(previous);
}

// The kernel name the store records: "OpenBLAS <version> <core>", the core OpenBLAS runs (the one
// OPENBLAS_CORETYPE asks for, when set).
TEST(LinalgPlacement, BlasKernelNamesTheCoreInUse) {
  const std::string kernel = blas_kernel();
  ASSERT_TRUE(kernel.starts_with("OpenBLAS 0.") || kernel.starts_with("OpenBLAS 1.")) << kernel;
  EXPECT_EQ(std::count(kernel.begin(), kernel.end(), ' '), 2) << kernel;
  if (const char* core = std::getenv("OPENBLAS_CORETYPE"); core && *core) {
    std::string want = core, got = kernel.substr(kernel.rfind(' ') + 1);
    for (auto* s : {&want, &got})
      std::transform(s->begin(), s->end(), s->begin(), [](unsigned char c) { return std::tolower(c); });
    EXPECT_EQ(got, want) << kernel;
  }
  EXPECT_NE(blas_info().find(kernel.substr(kernel.rfind(' ') + 1)), std::string::npos);
}

TEST(LinalgSvd, DiagonalMatrix) {
  Matrix a(4, 3);
  a(0, 0) = 2.0;
  a(1, 1) = -5.0;
  a(2, 2) = 0.5;
  const auto s = singular_values(a);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_NEAR(s[0], 5.0, 1e-14);
  EXPECT_NEAR(s[1], 2.0, 1e-14);
  EXPECT_NEAR(s[2], 0.5, 1e-14);
}

TEST(LinalgSvd, RankOneOuterProduct) {
  // u v^T has the single singular value |u| |v|.
  const std::vector<double> u = {1.0, -2.0, 2.0};           // |u| = 3
  const std::vector<double> v = {3.0, 0.0, 4.0, 0.0, 0.0};  // |v| = 5
  Matrix a(3, 5);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j) a(i, j) = u[i] * v[j];
  const Matrix copy = a;
  const auto s = singular_values(a);
  EXPECT_EQ(a, copy);  // input untouched
  ASSERT_EQ(s.size(), 3u);
  EXPECT_NEAR(s[0], 15.0, 1e-13);
  EXPECT_NEAR(s[1], 0.0, 1e-13);
  EXPECT_NEAR(s[2], 0.0, 1e-13);
}

TEST(LinalgSvd, TwoByTwoClosedForm) {
  // [[a, b], [c, d]]: s1,2 = sqrt((F ± sqrt(F^2 - 4 det^2)) / 2) with F = a^2 + b^2 + c^2 + d^2.
  Matrix m(2, 2);
  m(0, 0) = 3.0;
  m(0, 1) = 1.0;
  m(1, 0) = -2.0;
  m(1, 1) = 4.0;
  const double f = 9 + 1 + 4 + 16, det = 3 * 4 - 1 * (-2);
  const double root = std::sqrt(f * f - 4 * det * det);
  const auto s = singular_values(m);
  EXPECT_NEAR(s[0], std::sqrt((f + root) / 2), 1e-13);
  EXPECT_NEAR(s[1], std::sqrt((f - root) / 2), 1e-13);
}

TEST(LinalgSvd, MatchesJacobiEigenvaluesOfGram) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{6, 4}, {4, 6}, {5, 5}, {1, 7}, {7, 1}}) {
    const Matrix a = random_matrix(m, n, static_cast<unsigned>(100 * m + n));
    const auto s = singular_values(a);
    ASSERT_EQ(s.size(), std::min(m, n));
    EXPECT_TRUE(std::is_sorted(s.rbegin(), s.rend()));
    // Eigenvalues of the smaller Gram matrix are s_i^2.
    const Matrix g = m >= n ? naive_mul(naive_transpose(a), a) : naive_mul(a, naive_transpose(a));
    const auto ev = jacobi_eigenvalues(g);
    for (std::size_t i = 0; i < s.size(); ++i)
      EXPECT_NEAR(s[i], std::sqrt(std::max(ev[i], 0.0)), 1e-12) << m << "x" << n;
    double ss = 0.0;
    for (double x : s) ss += x * x;
    EXPECT_NEAR(ss, fro2(a), 1e-12 * fro2(a));
    if (m == n) {
      const double prod = std::accumulate(s.begin(), s.end(), 1.0, std::multiplies<>());
      EXPECT_NEAR(prod, std::abs(det_lu(a)), 1e-12);
    }
  }
}

// gram_top(A, alpha) is the Gram summary of sqrt(alpha) A without forming it.
TEST(LinalgGram, AlphaScalesTheGramMatrix) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{6, 11}, {11, 6}, {8, 8}, {1, 5}}) {
    const Matrix a = random_matrix(m, n, static_cast<unsigned>(300 * m + n));
    const GramTop g1 = gram_top(a);
    for (double alpha : {0.25, 0.37, 1e-200, 3e150}) {
      Matrix b = a;
      for (double& x : b.values()) x *= std::sqrt(alpha);
      const GramTop ga = gram_top(a, alpha), gb = gram_top(b);
      SCOPED_TRACE(testing::Message() << m << "x" << n << " alpha " << alpha);
      EXPECT_NEAR(ga.lambda1, gb.lambda1, 1e-14 * gb.lambda1);
      EXPECT_NEAR(ga.lambda2, gb.lambda2, 1e-14 * gb.lambda1);
      EXPECT_NEAR(ga.trace, gb.trace, 1e-14 * gb.trace);
      EXPECT_NEAR(ga.fro2, gb.fro2, 1e-14 * gb.fro2);
      EXPECT_NEAR(ga.lambda1, alpha * g1.lambda1, 1e-14 * alpha * g1.lambda1);
    }
  }
}

// The Gram matrix in column pieces of unpacked GEMMs (forced on any CPU) against one dsyrk: the
// same summary to rounding, for A A^T and A^T A, with an alpha, at orders that are and are not
// multiples of gram_piece.
TEST(LinalgGram, PiecesMatchOneDsyrk) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{20, 100}, {60, 60}, {150, 40}, {37, 90}, {5, 9}}) {
    const Matrix a = random_matrix(m, n, static_cast<unsigned>(7 * m + n));
    ASSERT_LE(static_cast<double>(std::min(m, n) * gram_piece * std::max(m, n)), openblas_unpacked_limit);
    for (double alpha : {1.0, 0.37}) {
      const double previous = set_unpacked_gemm_limit(0.0);
      const GramTop whole = gram_top(a, alpha);
      set_unpacked_gemm_limit(openblas_unpacked_limit);
      const GramTop pieces = gram_top(a, alpha);
      set_unpacked_gemm_limit(previous);
      SCOPED_TRACE(testing::Message() << m << "x" << n << " alpha " << alpha);
      EXPECT_NEAR(pieces.lambda1, whole.lambda1, 1e-13 * whole.lambda1);
      EXPECT_NEAR(pieces.lambda2, whole.lambda2, 1e-13 * whole.lambda1);
      EXPECT_NEAR(pieces.trace, whole.trace, 1e-13 * whole.trace);
      EXPECT_NEAR(pieces.fro2, whole.fro2, 1e-13 * whole.fro2);
      // and the exact values: trace = alpha ||A||_F^2
      double fro = 0.0;
      for (double x : a.values()) fro += x * x;
      EXPECT_NEAR(pieces.trace, alpha * fro, 1e-13 * alpha * fro);
    }
  }
}

// The bisection for the two largest eigenvalues of a symmetric tridiagonal matrix against the
// eigenvalues LAPACK's dgeev finds for the same dense matrix: random, with repeated eigenvalues (a zero
// off-diagonal), negative, at extreme scales, and the 2 x 2 closed form.
TEST(LinalgTridiagonal, TopTwoEigenvaluesMatchLapack) {
  std::mt19937_64 gen(77);
  std::normal_distribution<double> nd;
  for (std::size_t n : {1u, 2u, 3u, 10u, 60u})
    for (double scale : {1.0, 1e-200, 1e200})
      for (int variant = 0; variant < 3; ++variant) {
        std::vector<double> d(n), e(n ? n - 1 : 0);
        for (double& x : d) x = nd(gen) * scale;
        for (double& x : e) x = nd(gen) * scale;
        if (variant == 1 && n >= 3) {  // block diagonal with the same block twice: repeated top
          e[n / 2 - 1] = 0.0;
          for (std::size_t i = 0; i < n / 2; ++i) d[n / 2 + i] = d[i];
          for (std::size_t i = 0; i + 1 < n / 2; ++i) e[n / 2 + i] = e[i];
        }
        if (variant == 2)  // all eigenvalues negative
          for (double& x : d) x = -std::abs(x) - 4.0 * scale;
        Matrix t(n, n);
        for (std::size_t i = 0; i < n; ++i) {
          t(i, i) = d[i];
          if (i + 1 < n) t(i, i + 1) = t(i + 1, i) = e[i];
        }
        std::vector<double> ref;  // LAPACK's dgeev of the dense matrix (real: T is symmetric)
        for (const auto& z : eigenvalues(t)) ref.push_back(z.real());
        std::sort(ref.begin(), ref.end(), std::greater<>());
        const auto [l1, l2] = top_two_tridiagonal(d, e);
        double norm = 0.0;
        for (double x : ref) norm = std::max(norm, std::abs(x));
        SCOPED_TRACE(testing::Message() << "n " << n << " scale " << scale << " variant " << variant);
        EXPECT_NEAR(l1, ref[0], 1e-14 * norm);
        EXPECT_NEAR(l2, n >= 2 ? ref[1] : 0.0, 1e-14 * norm);
        // lambda_1 alone: the same bisection, bitwise, and no lambda_2
        const auto [only1, none] = top_two_tridiagonal(d, e, false);
        EXPECT_EQ(only1, l1);
        if (n > 0) {
          EXPECT_TRUE(std::isnan(none));
        }
      }
  // 2 x 2: (a + c)/2 +- sqrt(((a - c)/2)^2 + b^2)
  const auto [a1, a2] = top_two_tridiagonal(std::vector<double>{3.0, 1.0}, std::vector<double>{2.0});
  EXPECT_NEAR(a1, 2.0 + std::sqrt(5.0), 4e-15);  // bisection to a few eps ||T||
  EXPECT_NEAR(a2, 2.0 - std::sqrt(5.0), 4e-15);
}

// householder_tridiagonal keeps the spectrum: all eigenvalues of the tridiagonal (dense, dgeev)
// against those of the symmetric input (dgeev of the full matrix), to a few eps ||A|| n; for
// random matrices, a diagonal one (no reflection), one with a zero column below the diagonal, a
// Gram matrix of rank 2 (the collapsed signals) and a sizes around the fused row's 4 lanes.
TEST(LinalgTridiagonal, HouseholderReductionKeepsTheSpectrum) {
  std::mt19937_64 gen(78);
  std::normal_distribution<double> nd;
  for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 6u, 9u, 17u, 64u, 150u})
    for (int variant = 0; variant < 4; ++variant) {
      Matrix A(n, n);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j <= i; ++j) A(i, j) = A(j, i) = nd(gen);
      if (variant == 1)  // diagonal
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j)
            if (i != j) A(i, j) = 0.0;
      if (variant == 2 && n >= 3)  // column 1 is zero below the diagonal
        for (std::size_t i = 2; i < n; ++i) A(i, 1) = A(1, i) = 0.0;
      if (variant == 3) {  // rank 2: x x^T + 1e-3 y y^T
        std::vector<double> x(n), y(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = nd(gen), y[i] = nd(gen);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j) A(i, j) = x[i] * x[j] + 1e-3 * y[i] * y[j];
      }
      std::vector<double> ref;
      for (const auto& z : eigenvalues(A)) ref.push_back(z.real());
      Matrix work = A;
      for (std::size_t i = 0; i < n; ++i)  // only the upper triangle may be read
        for (std::size_t j = 0; j < i; ++j) work(i, j) = std::numeric_limits<double>::quiet_NaN();
      std::vector<double> d(n), e(n - 1);
      householder_tridiagonal(work, d, e);
      Matrix t(n, n);
      for (std::size_t i = 0; i < n; ++i) {
        t(i, i) = d[i];
        if (i + 1 < n) t(i, i + 1) = t(i + 1, i) = e[i];
      }
      std::vector<double> got;
      for (const auto& z : eigenvalues(t)) got.push_back(z.real());
      std::sort(ref.begin(), ref.end());
      std::sort(got.begin(), got.end());
      double norm = 0.0;
      for (double x : ref) norm = std::max(norm, std::abs(x));
      SCOPED_TRACE(testing::Message() << "n " << n << " variant " << variant);
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], ref[i], 4e-16 * norm * static_cast<double>(n + 4));
    }
  Matrix bad(3, 2);
  std::vector<double> d(3), e(2);
  EXPECT_THROW(householder_tridiagonal(bad, d, e), Error);
}

// exp_vectorisable within 1 ulp of libm's exp over its whole range (random arguments in
// [-708, 709.78] and in the softmax range [-40, 0], the ends), its documented special values, and
// exp_affine_sum (the vectorised loop of the softmax and Markov rows) giving the same values and
// their sum.
TEST(VectorisedExp, WithinOneUlpOfLibm) {
  std::mt19937_64 gen(81);
  std::uniform_real_distribution<double> wide(-708.0, 709.78), soft(-40.0, 0.0), small(-1.0, 1.0);
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 0.5 * std::log(2.0), -0.5 * std::log(2.0), 709.78, -707.9, 1e-300};
  for (int i = 0; i < 200000; ++i) xs.insert(xs.end(), {wide(gen), soft(gen), small(gen)});
  double worst = 0.0;
  for (double x : xs) {
    const double want = std::exp(x), got = exp_vectorisable(x);
    const double ulp = std::nextafter(want, INFINITY) - want;
    worst = std::max(worst, std::abs(got - want) / ulp);
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(exp_vectorisable(0.0), 1.0);
  EXPECT_EQ(exp_vectorisable(-708.5), 0.0);  // below 2^-1021: flushed to 0
  EXPECT_EQ(exp_vectorisable(-INFINITY), 0.0);
  EXPECT_EQ(exp_vectorisable(709.79), INFINITY);
  EXPECT_EQ(exp_vectorisable(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(exp_vectorisable(NAN)));
  // the loop: a x - b, every length around the vector widths
  for (std::size_t n : {0u, 1u, 3u, 4u, 5u, 8u, 13u, 150u}) {
    std::vector<double> x(n), ref(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = soft(gen);
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += ref[i] = exp_vectorisable(0.7 * x[i] - 1.5);
    const double got_sum = exp_affine_sum(x.data(), n, 0.7, 1.5);
    EXPECT_EQ(x, ref) << n;
    EXPECT_NEAR(got_sum, sum, 4e-16 * sum * static_cast<double>(n)) << n;
  }
}

// A = U diag(s) V^T (m x n) with orthonormal U, V and the spectrum s, descending from 1 to 1e-10
// with a pair 1e-9 apart at the top.
Matrix with_spectrum(std::size_t m, std::size_t n, const std::vector<double>& s, unsigned seed) {
  const std::size_t k = s.size();
  const Matrix U = thin_q(random_matrix(std::max(m, n), k, seed)), V = thin_q(random_matrix(k, k, seed + 1));
  Matrix tall(std::max(m, n), k);
  for (std::size_t i = 0; i < tall.rows(); ++i)
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t c = 0; c < k; ++c) tall(i, j) += U(i, c) * s[c] * V(j, c);
  return m >= n ? tall : naive_transpose(tall);
}

std::vector<double> test_spectrum(std::size_t k) {
  std::vector<double> s(k);
  for (std::size_t i = 0; i < k; ++i) s[i] = std::pow(1e-10, static_cast<double>(i) / static_cast<double>(k - 1));
  s[1] = 1.0 - 1e-9;
  return s;
}

// Long matrices (short side >= 64, long side >= twice it) take R of a blocked QR first: 1, 2, 5,
// 15 and 16 blocks, tall and wide. Each singular value to 1e-13 of s_1, and as LAPACK's dgesdd on
// A gives it.
TEST(LinalgSvd, LongMatricesMatchTheirPrescribedSpectrum) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{130, 64},
                      {64, 130},
                      {300, 64},
                      {1000, 100},
                      {100, 1000},
                      {1920, 64},
                      {3000, 70}}) {
    const std::vector<double> want = test_spectrum(std::min(m, n));
    const Matrix a = with_spectrum(m, n, want, static_cast<unsigned>(m + 7 * n));
    const std::vector<double> got = singular_values(a);
    Matrix copy = a;
    std::vector<double> lapack(want.size());
    ASSERT_EQ(LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(n), static_cast<lapack_int>(m), copy.data(),
                             static_cast<lapack_int>(n), lapack.data(), nullptr, 1, nullptr, 1),
              0);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-13) << m << "x" << n << " s_" << i + 1;
      EXPECT_NEAR(got[i], lapack[i], 1e-13) << m << "x" << n << " s_" << i + 1;
    }
  }
}

// The blocks are fixed by the shape: the same bits on 1 and 2 threads.
TEST(LinalgSvd, LongMatricesGiveTheSameBitsOnAnyThreadCount) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{1000, 100}, {64, 2100}}) {
    const Matrix a = random_matrix(m, n, 31);
    const std::vector<double> one = singular_values(a);
    parallel::set_threads(2);
    const std::vector<double> two = singular_values(a);
    parallel::set_threads(1);
    EXPECT_EQ(one, two) << m << "x" << n;
  }
}

// Far from 1 a long matrix is scaled by a power of two before its QR (LAPACK's QR does not scale):
// A 2^600 and A 2^-600 give exactly 2^600 and 2^-600 times A's values (max |a| in [1/2, 1)).
TEST(LinalgSvd, LongMatricesAtExtremeScales) {
  const Matrix a = random_matrix(1000, 100, 41);
  const std::vector<double> s = singular_values(a);
  for (int e : {600, -600}) {
    Matrix scaled = a;
    for (double& x : scaled.values()) x = std::ldexp(x, e);
    const std::vector<double> got = singular_values(scaled);
    ASSERT_EQ(got.size(), s.size());
    for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(got[i], std::ldexp(s[i], e)) << "2^" << e << " s_" << i + 1;
  }
}

TEST(LinalgSvd, LongMatricesWithNonFiniteEntriesAreRefused) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (auto [m, n] : {std::pair<std::size_t, std::size_t>{300, 64}, {64, 300}}) {
      Matrix a = random_matrix(m, n, 43);
      a(m - 1, n - 1) = bad;
      EXPECT_THROW((void)singular_values(a), Error) << m << "x" << n << " " << bad;
      try {
        (void)singular_values(a);
      } catch (const Error& e) {  // named as such, not as a LAPACK argument error
        EXPECT_NE(std::string(e.what()).find("non-finite entries"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(LinalgSvd, EmptyMatrixHasNoSingularValues) {
  EXPECT_TRUE(singular_values(Matrix(0, 3)).empty());
  EXPECT_TRUE(singular_values(Matrix(3, 0)).empty());
}

void check_thin_q(const Matrix& a) {
  const Matrix q = thin_q(a);
  ASSERT_EQ(q.rows(), a.rows());
  ASSERT_EQ(q.cols(), a.cols());
  const std::size_t n = a.cols();
  EXPECT_LT(max_abs_diff(naive_mul(naive_transpose(q), q), Matrix::identity(n)), 1e-13);
  const Matrix r = naive_mul(naive_transpose(q), a);  // R = Q^T A
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_GT(r(i, i), 0.0) << "sign fix: diag(R) > 0 at " << i;
    for (std::size_t j = 0; j < i; ++j) EXPECT_NEAR(r(i, j), 0.0, 1e-13) << i << "," << j;
  }
  EXPECT_LT(max_abs_diff(naive_mul(q, r), a), 1e-13);  // Q R = A
}

TEST(LinalgThinQ, SquareAndTall) {
  check_thin_q(random_matrix(5, 5, 21));
  check_thin_q(random_matrix(9, 4, 22));
  check_thin_q(random_matrix(7, 1, 23));
}

TEST(LinalgThinQ, SignFixOnNegativeDiagonal) {
  // A = -I: Householder QR gives Q = I, R = -I (tau = 0); the unique factor with diag(R) > 0
  // is Q = -I, R = I.
  Matrix a = Matrix::identity(3);
  for (double& x : a.values()) x = -x;
  const Matrix q = thin_q(a);
  EXPECT_LT(max_abs_diff(q, a), 1e-15);
}

TEST(LinalgThinQ, WideMatrixThrows) { EXPECT_THROW(thin_q(Matrix(2, 3)), Error); }

TEST(LinalgInfo, BlasThreadsAndInfo) {
  const int before = set_blas_threads(1);
  EXPECT_GE(before, 1);
  EXPECT_EQ(set_blas_threads(before), 1);
  EXPECT_THROW(set_blas_threads(0), Error);
  const std::string info = blas_info();
  EXPECT_EQ(info.rfind("OpenBLAS ", 0), 0u) << info;
  EXPECT_EQ(info.find("OpenBLAS OpenBLAS"), std::string::npos) << info;
  EXPECT_NE(info.find(" core "), std::string::npos) << info;
}

// gram_top declines the eigensolve only when trace and Frobenius norm prove lambda_2 < ratio *
// lambda_1: a rank-1 matrix plus 1e-6 noise (lambda_2 / lambda_1 ~ 1e-12) is declined, a Gaussian
// matrix (lambda_2 / lambda_1 ~ 0.5) and a matrix at lambda_2 / lambda_1 = 2e-3 are solved.
TEST(LinalgGram, DeclinesOnlyProvablyCollapsedSpectra) {
  Matrix u = random_matrix(30, 1, 5), v = random_matrix(1, 70, 6);
  Matrix rank1 = naive_mul(u, v), noise = random_matrix(30, 70, 7);
  for (std::size_t i = 0; i < rank1.size(); ++i) rank1.data()[i] += 1e-6 * noise.data()[i];
  EXPECT_FALSE(gram_top(rank1, 1.0, 1e-3).solved);
  EXPECT_TRUE(gram_top(rank1, 1.0, 0.0).solved);  // no decline requested
  EXPECT_TRUE(gram_top(random_matrix(30, 70, 8), 1.0, 1e-3).solved);
  // two orthogonal directions with s_2^2 / s_1^2 = 2e-3: just above the ratio, must be solved
  Matrix two(30, 70);
  two(0, 0) = 1.0;
  two(1, 1) = std::sqrt(2e-3);
  const auto g = gram_top(two, 1.0, 1e-3);
  ASSERT_TRUE(g.solved);
  EXPECT_NEAR(g.lambda2 / g.lambda1, 2e-3, 1e-15);
}

// Determinant by Gaussian elimination with partial pivoting (test reference only).
double naive_det(Matrix a) {
  const std::size_t n = a.rows();
  double det = 1.0;
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t p = k;
    for (std::size_t i = k + 1; i < n; ++i)
      if (std::abs(a(i, k)) > std::abs(a(p, k))) p = i;
    if (p != k) {
      for (std::size_t j = 0; j < n; ++j) std::swap(a(k, j), a(p, j));
      det = -det;
    }
    det *= a(k, k);
    if (a(k, k) == 0.0) return 0.0;
    for (std::size_t i = k + 1; i < n; ++i) {
      const double f = a(i, k) / a(k, k);
      for (std::size_t j = k; j < n; ++j) a(i, j) -= f * a(k, j);
    }
  }
  return det;
}

// A triangular matrix has its diagonal as eigenvalues, here returned by descending modulus,
// ties (3 and -3) by descending real part.
TEST(LinalgEig, TriangularMatrixGivesItsDiagonal) {
  Matrix a(5, 5);
  const double diag[5] = {0.5, -3.0, 2.0, 3.0, -0.25};
  for (std::size_t i = 0; i < 5; ++i) {
    a(i, i) = diag[i];
    for (std::size_t j = i + 1; j < 5; ++j) a(i, j) = 0.1 * static_cast<double>(i + 2 * j);  // upper part
  }
  const auto ev = eigenvalues(a);
  const double want[5] = {3.0, -3.0, 2.0, 0.5, -0.25};
  ASSERT_EQ(ev.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(ev[i].real(), want[i], 1e-14) << i;
    EXPECT_EQ(ev[i].imag(), 0.0) << i;
  }
  // lower triangular too (the row-/column-major transpose must not matter)
  const auto evt = eigenvalues(naive_transpose(a));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(evt[i].real(), want[i], 1e-14) << i;
}

// A plane rotation by 90 degrees: +i then -i (equal modulus and real part: imag descending).
TEST(LinalgEig, RotationGivesPlusMinusI) {
  Matrix r(2, 2);
  r(0, 1) = -1.0;
  r(1, 0) = 1.0;
  const auto ev = eigenvalues(r);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NEAR(ev[0].real(), 0.0, 1e-15);
  EXPECT_NEAR(ev[0].imag(), 1.0, 1e-15);
  EXPECT_NEAR(ev[1].real(), 0.0, 1e-15);
  EXPECT_NEAR(ev[1].imag(), -1.0, 1e-15);
  // rotation by theta in a 3-d space with an axis: 1, e^{+-i theta}
  const double th = 0.7;
  Matrix q(3, 3);
  q(0, 0) = std::cos(th), q(0, 1) = -std::sin(th), q(1, 0) = std::sin(th), q(1, 1) = std::cos(th), q(2, 2) = 1.0;
  const auto e3 = eigenvalues(q);
  ASSERT_EQ(e3.size(), 3u);
  EXPECT_NEAR(e3[0].real(), 1.0, 1e-15);  // |.| all 1: real part descending puts 1 first
  EXPECT_NEAR(e3[1].real(), std::cos(th), 1e-15);
  EXPECT_NEAR(e3[1].imag(), std::sin(th), 1e-15);
  EXPECT_NEAR(e3[2].imag(), -std::sin(th), 1e-15);
}

// A random matrix: the eigenvalues sum to the trace and multiply to the determinant; complex
// ones come in conjugate pairs; the order is by descending modulus; A is left unchanged.
TEST(LinalgEig, RandomMatrixTraceDeterminantAndOrder) {
  const Matrix a = random_matrix(40, 40, 11);
  const Matrix copy = a;
  const auto ev = eigenvalues(a);
  EXPECT_EQ(max_abs_diff(a, copy), 0.0);
  ASSERT_EQ(ev.size(), 40u);
  std::complex<double> sum = 0.0, prod = 1.0;
  double trace = 0.0;
  for (std::size_t i = 0; i < 40; ++i) trace += a(i, i);
  for (const auto& z : ev) {
    sum += z;
    prod *= z;
  }
  EXPECT_NEAR(sum.real(), trace, 1e-12);
  EXPECT_NEAR(sum.imag(), 0.0, 1e-12);
  const double det = naive_det(a);
  EXPECT_NEAR(prod.real() / det, 1.0, 1e-10);
  EXPECT_NEAR(prod.imag() / std::abs(det), 0.0, 1e-10);
  std::size_t complex_count = 0;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(std::abs(ev[i - 1]), std::abs(ev[i])) << i;
    }
    if (ev[i].imag() > 0.0) {  // its conjugate follows right after
      ++complex_count;
      ASSERT_LT(i + 1, ev.size());
      EXPECT_EQ(ev[i + 1], std::conj(ev[i])) << i;
    }
  }
  EXPECT_GT(complex_count, 0u);   // a 40x40 uniform matrix has complex eigenvalues
  EXPECT_EQ(eigenvalues(a), ev);  // deterministic
}

TEST(LinalgEig, EdgeCases) {
  EXPECT_TRUE(eigenvalues(Matrix(0, 0)).empty());
  Matrix one(1, 1);
  one(0, 0) = -2.5;
  EXPECT_EQ(eigenvalues(one), (std::vector<std::complex<double>>{{-2.5, 0.0}}));
  EXPECT_THROW(eigenvalues(Matrix(2, 3)), Error);
  Matrix bad(2, 2);
  bad(1, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(eigenvalues(bad), Error);
}

}  // namespace
}  // namespace rcsweep::linalg
