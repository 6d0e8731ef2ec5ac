// linalg/blis and linalg::blis_range: BLIS's products against a naive long-double reference, and
// gemm's choice of library by the m n k of each call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "linalg/blis.hpp"
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

// alpha op(A) op(B) + beta C in long double, row-major with the given leading dimensions.
std::vector<long double> naive(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
                               const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
                               const double* c, std::size_t ldc) {
  std::vector<long double> out(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      long double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += static_cast<long double>(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      out[i * n + j] = alpha * s + (beta == 0.0 ? 0.0L : static_cast<long double>(beta) * c[i * ldc + j]);
    }
  return out;
}

bool bitwise_equal(const Matrix& x, const Matrix& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

// Restores the process's BLIS range after a test.
struct RangeGuard {
  BlisRange saved = blis_range();
  ~RangeGuard() { set_blis_range(saved); }
};

TEST(Blis, AvailableWhereTheBuildFoundIt) {
  if (!blis::library_path().empty()) {
    ASSERT_TRUE(blis::available()) << "the build found BLIS (" << blis::library_path() << ") but it cannot be opened";
    EXPECT_EQ(blis::kernel().rfind("BLIS ", 0), 0u) << blis::kernel();
  } else {
    EXPECT_FALSE(blis::available());
    EXPECT_EQ(blis::kernel(), "");
    EXPECT_THROW(set_blis_range(blis_everywhere), Error);
  }
}

// Every transpose pair, alpha and beta (beta = 0 must not read C: it holds NaN), operands that are
// views with leading dimensions beyond their widths, and shapes from 1 to past BLIS's small path.
TEST(Blis, DgemmMatchesNaiveReference) {
  if (!blis::available()) GTEST_SKIP() << "built without BLIS";
  struct Shape {
    std::size_t m, n, k;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{20, 20, 20}, Shape{37, 61, 150}, Shape{150, 300, 90},
                        Shape{260, 40, 520}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const auto& [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{-0.7, 1.0}, std::pair{2.5, -0.3}}) {
          const std::size_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 1, ldc = s.n + 2;
          const Matrix a = random_matrix(ta ? s.k : s.m, lda, 1), b = random_matrix(tb ? s.n : s.k, ldb, 2);
          Matrix c = random_matrix(s.m, ldc, 3);
          if (beta == 0.0) c.fill(std::numeric_limits<double>::quiet_NaN());
          const Matrix c0 = c;
          const auto want = naive(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c0.data(), ldc);
          blis::dgemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          double worst = 0.0;
          for (std::size_t i = 0; i < s.m; ++i) {
            for (std::size_t j = 0; j < s.n; ++j)
              worst = std::max(worst, static_cast<double>(std::fabs(c(i, j) - want[i * s.n + j])));
            for (std::size_t j = s.n; j < ldc; ++j)  // beyond the product's columns: untouched
              ASSERT_TRUE(std::memcmp(c.data() + i * ldc + j, c0.data() + i * ldc + j, sizeof(double)) == 0)
                  << "column " << j << " written";
          }
          EXPECT_LE(worst, 1e-13 * static_cast<double>(s.k)) << s.m << " x " << s.n << " x " << s.k << " ta " << ta
                                                             << " tb " << tb << " alpha " << alpha << " beta " << beta;
        }
}

TEST(Blis, RangeContainsItsUpperEndNotItsLower) {
  const MnkRange r{1000.0, 8000.0};
  EXPECT_FALSE(r.contains(1000.0));
  EXPECT_TRUE(r.contains(1001.0));
  EXPECT_TRUE(r.contains(8000.0));
  EXPECT_FALSE(r.contains(8001.0));
  EXPECT_TRUE(MnkRange{}.empty());
  EXPECT_TRUE((MnkRange{5.0, 5.0}.empty()));
  const BlisRange plain_only{r, {}};
  EXPECT_TRUE(plain_only.contains(false, 2000.0));
  EXPECT_FALSE(plain_only.contains(true, 2000.0));
  EXPECT_FALSE(plain_only.empty());
  EXPECT_TRUE(BlisRange{}.empty());
  EXPECT_FALSE(blis_everywhere.empty());
}

// gemm gives each BLAS call to the library whose range holds its kind (a transpose or none) and
// m n k: its bits are those of that library's call, and the kernel text says so.
TEST(Blis, GemmTakesTheLibraryOfTheRange) {
  if (!blis::available()) GTEST_SKIP() << "built without BLIS";
  RangeGuard guard;
  set_blis_range({});
  EXPECT_EQ(blas_kernel().find("BLIS"), std::string::npos);
  bool told_apart = false;
  // Shapes where the two libraries' bits differ (their summation orders do at some k).
  for (const std::size_t k : {150, 300, 517, 1000})
    for (const bool transposed : {false, true}) {
      const std::size_t m = 9, n = 11;
      const Matrix a = random_matrix(m, k, 4), b = transposed ? random_matrix(n, k, 5) : random_matrix(k, n, 5);
      const Op op = transposed ? Op::trans : Op::none;
      const std::size_t ldb = transposed ? k : n;
      Matrix by_openblas(m, n), by_blis(m, n), direct(m, n), outside(m, n), other_kind(m, n);
      set_blis_range({});
      gemm(1.0, a, Op::none, b, op, 0.0, by_openblas);
      blis::dgemm(false, transposed, m, n, k, 1.0, a.data(), k, b.data(), ldb, 0.0, direct.data(), n);
      const double mnk = static_cast<double>(m * n * k);
      const MnkRange holds{mnk - 1.0, mnk}, misses{mnk, 2.0 * mnk};
      set_blis_range(transposed ? BlisRange{{}, holds} : BlisRange{holds, {}});
      EXPECT_NE(blas_kernel().find(transposed ? " + BLIS " : " + BLIS "), std::string::npos) << blas_kernel();
      EXPECT_NE(blas_kernel().find(transposed ? "for A B^T at m n k in (" : "for A B at m n k in ("), std::string::npos)
          << blas_kernel();
      gemm(1.0, a, Op::none, b, op, 0.0, by_blis);
      EXPECT_TRUE(bitwise_equal(by_blis, direct)) << "k = " << k << ": not BLIS's bits inside the range";
      set_blis_range(transposed ? BlisRange{{}, misses} : BlisRange{misses, {}});  // just outside
      gemm(1.0, a, Op::none, b, op, 0.0, outside);
      EXPECT_TRUE(bitwise_equal(outside, by_openblas)) << "k = " << k << ": not OpenBLAS's bits outside the range";
      set_blis_range(transposed ? BlisRange{holds, {}} : BlisRange{{}, holds});  // the other kind's range
      gemm(1.0, a, Op::none, b, op, 0.0, other_kind);
      EXPECT_TRUE(bitwise_equal(other_kind, by_openblas)) << "k = " << k << ": the other kind's range was taken";
      told_apart = told_apart || !bitwise_equal(by_openblas, by_blis);
    }
  EXPECT_TRUE(told_apart) << "OpenBLAS and BLIS gave the same bits at every k: the routing was not observed";
}

// With BLIS for every call, gemm's parts (large products cut into row or column parts) give the same
// bits on 1, 2 and 3 threads, and agree with the naive reference.
TEST(Blis, GemmBitwiseOnAnyThreadCount) {
  if (!blis::available()) GTEST_SKIP() << "built without BLIS";
  RangeGuard guard;
  set_blis_range(blis_everywhere);
  for (const auto& [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{700, 300, 400}, {64, 900, 500}}) {
    const Matrix a = random_matrix(m, k, 6), b = random_matrix(n, k, 7);
    Matrix first(m, n);
    for (const int threads : {1, 2, 3}) {
      parallel::set_threads(threads);
      Matrix c(m, n);
      gemm(0.5, a, Op::none, b, Op::trans, 0.0, c);
      parallel::set_threads(1);
      if (threads == 1) {
        first = c;
        const auto want = naive(false, true, m, n, k, 0.5, a.data(), k, b.data(), k, 0.0, nullptr, n);
        double worst = 0.0;
        for (std::size_t i = 0; i < m * n; ++i)
          worst = std::max(worst, static_cast<double>(std::fabs(c.data()[i] - want[i])));
        EXPECT_LE(worst, 1e-12) << m << " x " << n << " x " << k;
      } else {
        EXPECT_TRUE(bitwise_equal(c, first)) << m << " x " << n << " x " << k << ", " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace rcsweep::linalg
