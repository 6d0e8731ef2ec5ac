// base/parallel and the threaded linalg kernels: every index once, errors rethrown, and products,
// matrix-vector products and Gram matrices bitwise the same on 1, 2 and 3 threads (fixed parts),
// the passes of the metrics bitwise the same on 1, 2 and 3 threads (fixed parts), and equal to
// naive references within rounding.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "base/parallel.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"

namespace rcsweep {
namespace {

Matrix random_matrix(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  Matrix a(m, n);
  for (double& x : a.values()) x = dist(gen);
  return a;
}

bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Restores the thread count of the process (1) after each test.
struct Threads : ::testing::Test {
  void TearDown() override { parallel::set_threads(1); }
};

TEST_F(Threads, ForEachRunsEveryIndexOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    parallel::set_threads(threads);
    EXPECT_EQ(parallel::threads(), threads);
    std::vector<std::atomic<int>> seen(1000);
    parallel::for_each(seen.size(), [&](std::size_t i) { ++seen[i]; });
    for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "index " << i << ", " << threads;
  }
}

TEST_F(Threads, ForEachRethrowsThePartsError) {
  parallel::set_threads(2);
  EXPECT_THROW(parallel::for_each(64,
                                  [](std::size_t i) {
                                    if (i == 17) throw std::runtime_error("part 17");
                                  }),
               std::runtime_error);
  parallel::set_threads(1);
  EXPECT_THROW(parallel::for_each(4, [](std::size_t) { throw std::runtime_error("serial"); }), std::runtime_error);
}

TEST_F(Threads, PartsDoNotNest) {
  parallel::set_threads(2);
  std::atomic<int> inner_calls{0};
  parallel::for_each(4, [&](std::size_t) { parallel::for_each(8, [&](std::size_t) { ++inner_calls; }); });
  EXPECT_EQ(inner_calls.load(), 32);
}

TEST(Parts, CoverTheItemsExactlyOnce) {
  for (std::size_t n : {0u, 1u, 255u, 256u, 257u, 1000u}) {
    const parallel::Parts p{n, 256};
    std::size_t covered = 0;
    for (std::size_t i = 0; i < p.count(); ++i) {
      EXPECT_EQ(p.begin(i), covered);
      EXPECT_GT(p.length(i), 0u);
      covered += p.length(i);
    }
    EXPECT_EQ(covered, n);
  }
  EXPECT_EQ(parallel::row_parts(100, 10, 1000).size, 100u);  // rows of 10 entries, parts of >= 1000
  EXPECT_EQ(parallel::row_parts(7, 1u << 20).size, 1u);      // one long row per part
}

TEST(ThreadCount, FromEnvironment) {
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(parallel::threads_from_environment(), 3);
  ::setenv("OMP_NUM_THREADS", "4,2", 1);  // nested list: the outer level
  EXPECT_EQ(parallel::threads_from_environment(), 4);
  for (const char* bad : {"", "0", "-2", "abc", "2x"}) {
    ::setenv("OMP_NUM_THREADS", bad, 1);
    EXPECT_EQ(parallel::threads_from_environment(), 1) << bad;
  }
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(parallel::threads_from_environment(), 1);
}

TEST(GemmParts, FixedByTheShapes) {
  EXPECT_EQ(linalg::gemm_parts(150, 750, 750).parts.count(), 1u);  // the Mind the Gap grid's X W_V: one call
  EXPECT_EQ(linalg::gemm_parts(512, 512, 512).parts.count(), 2u);  // a d = 512 W_Q W_K^T: 2 x 256 rows
  const auto tall = linalg::gemm_parts(1000, 800, 800);
  EXPECT_FALSE(tall.columns);
  EXPECT_EQ(tall.parts.size, linalg::gemm_part_size);
  EXPECT_EQ(tall.parts.count(), 4u);
  const auto wide = linalg::gemm_parts(300, 1100, 2048);
  EXPECT_TRUE(wide.columns);
  EXPECT_EQ(wide.parts.count(), 5u);
}

// Where the BLAS multiplies small products without packing: a product without transposes above
// the limit is cut along C's columns into pieces within it (a multiple of 8 columns, at least
// gemm_min_piece), else left whole.
TEST(GemmParts, PiecesForTheUnpackedKernels) {
  constexpr double limit = linalg::openblas_unpacked_limit;
  const auto xw = linalg::gemm_parts(150, 150, 150, false, limit);  // T = d = 150: X W_V, M V
  EXPECT_TRUE(xw.columns);
  EXPECT_EQ(xw.parts.size, 40u);  // 150 x 44 x 150 fits: 40
  EXPECT_EQ(xw.parts.count(), 4u);
  const auto wide = linalg::gemm_parts(100, 500, 500, false, limit);  // 100 x 20 x 500 fits: 16
  EXPECT_EQ(wide.parts.size, 16u);
  EXPECT_EQ(wide.parts.count(), 32u);
  struct Whole {
    std::size_t m, n, k;
    bool transposed;
    double limit;
  };
  for (const Whole w : {Whole{150, 750, 750, false, limit},    // 8 columns would fit: too narrow
                        Whole{100, 100, 100, false, limit},    // within the limit already
                        Whole{150, 150, 150, true, limit},     // a transposed operand
                        Whole{150, 150, 150, false, 0.0},      // a BLAS without unpacked kernels
                        Whole{200, 16, 400, false, limit}}) {  // 8 columns would fit: too narrow
    const auto parts = linalg::gemm_parts(w.m, w.n, w.k, w.transposed, w.limit);
    EXPECT_EQ(parts.parts.count(), 1u) << w.m << " x " << w.n << " x " << w.k;
  }
  // Above gemm_split_min_flops the parts of the threads, whatever the limit.
  EXPECT_EQ(linalg::gemm_parts(1000, 800, 800, false, limit).parts.size, linalg::gemm_part_size);
  for (std::size_t m : {20, 60, 100, 150})
    for (std::size_t n : {40, 150, 300, 750})
      for (std::size_t k : {20, 150, 300}) {
        const auto parts = linalg::gemm_parts(m, n, k, false, limit);
        if (parts.parts.count() == 1) continue;
        ASSERT_TRUE(parts.columns);
        EXPECT_LE(static_cast<double>(m * parts.parts.size * k), limit) << m << " x " << n << " x " << k;
        EXPECT_EQ(parts.parts.size % 8, 0u);
        EXPECT_GE(parts.parts.size, linalg::gemm_min_piece);
      }
}

// The product in pieces (forced on any CPU): the naive product within rounding, and the same bits
// on 1, 2 and 3 threads; transposed operands stay one call.
TEST_F(Threads, GemmInPiecesIsBitwiseTheSameOnAnyThreadCount) {
  const double previous = linalg::set_unpacked_gemm_limit(linalg::openblas_unpacked_limit);
  const Matrix A = random_matrix(150, 150, 5), B = random_matrix(150, 300, 6), C0 = random_matrix(150, 300, 7);
  ASSERT_GT(linalg::gemm_parts(150, 300, 150).parts.count(), 1u);
  Matrix reference;
  for (int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    Matrix C = C0;
    linalg::gemm(0.5, A, linalg::Op::none, B, linalg::Op::none, -2.0, C);
    if (threads == 1) {
      reference = C;
      for (std::size_t i = 0; i < 150; i += 7)
        for (std::size_t j = 0; j < 300; j += 5) {
          long double s = 0;
          for (std::size_t l = 0; l < 150; ++l) s += static_cast<long double>(A(i, l)) * B(l, j);
          EXPECT_NEAR(C(i, j), static_cast<double>(0.5L * s - 2.0L * C0(i, j)), 1e-12 * 150) << i << ", " << j;
        }
    } else {
      EXPECT_TRUE(bitwise_equal(C, reference)) << threads << " threads";
    }
  }
  linalg::set_unpacked_gemm_limit(previous);
}

// C = alpha op(A) op(B) + beta C above the split threshold, for every op and both split
// directions: the same bits on 1, 2 and 3 threads, and the naive product within rounding.
TEST_F(Threads, GemmIsBitwiseTheSameOnAnyThreadCount) {
  struct Case {
    std::size_t m, n, k;
  };
  for (const Case c : {Case{1100, 700, 700}, Case{300, 1100, 1700}}) {
    ASSERT_GT(linalg::gemm_parts(c.m, c.n, c.k).parts.count(), 1u);
    for (const auto opA : {linalg::Op::none, linalg::Op::trans})
      for (const auto opB : {linalg::Op::none, linalg::Op::trans}) {
        const Matrix A = opA == linalg::Op::none ? random_matrix(c.m, c.k, 1) : random_matrix(c.k, c.m, 1);
        const Matrix B = opB == linalg::Op::none ? random_matrix(c.k, c.n, 2) : random_matrix(c.n, c.k, 2);
        const Matrix C0 = random_matrix(c.m, c.n, 3);
        Matrix reference;
        for (int threads : {1, 2, 3}) {
          parallel::set_threads(threads);
          Matrix C = C0;
          linalg::gemm(0.5, A, opA, B, opB, -2.0, C);
          if (threads == 1) {
            reference = C;
            // naive check of a sample of entries
            for (std::size_t i = 0; i < c.m; i += 37)
              for (std::size_t j = 0; j < c.n; j += 41) {
                long double s = 0;
                for (std::size_t l = 0; l < c.k; ++l) {
                  const double a = opA == linalg::Op::none ? A(i, l) : A(l, i);
                  const double b = opB == linalg::Op::none ? B(l, j) : B(j, l);
                  s += static_cast<long double>(a) * b;
                }
                const double expect = static_cast<double>(0.5L * s - 2.0L * C0(i, j));
                EXPECT_NEAR(C(i, j), expect, 1e-11 * std::sqrt(static_cast<double>(c.k)) * 10);
              }
          } else {
            EXPECT_TRUE(bitwise_equal(C, reference))
                << c.m << "x" << c.n << "x" << c.k << " opA " << static_cast<int>(opA) << " opB "
                << static_cast<int>(opB) << " on " << threads << " threads";
          }
        }
      }
  }
}

TEST_F(Threads, GemvIsBitwiseTheSameOnAnyThreadCount) {
  const Matrix A = random_matrix(2300, 1900, 4);
  ASSERT_GT(linalg::gemv_parts(A.rows(), A.cols()).count(), 1u);
  for (const auto op : {linalg::Op::none, linalg::Op::trans}) {
    const std::size_t in = op == linalg::Op::none ? A.cols() : A.rows();
    const std::size_t out = op == linalg::Op::none ? A.rows() : A.cols();
    std::vector<double> x(in);
    for (std::size_t i = 0; i < in; ++i) x[i] = std::sin(0.1 * static_cast<double>(i));
    std::vector<double> reference;
    for (int threads : {1, 2, 3}) {
      parallel::set_threads(threads);
      std::vector<double> y(out, -1.0);
      linalg::gemv(A, op, x.data(), y.data());
      if (threads == 1) {
        reference = y;
        for (std::size_t i = 0; i < out; i += 97) {
          long double s = 0;
          for (std::size_t j = 0; j < in; ++j)
            s += static_cast<long double>(op == linalg::Op::none ? A(i, j) : A(j, i)) * x[j];
          EXPECT_NEAR(y[i], static_cast<double>(s), 1e-11);
        }
      } else {
        EXPECT_EQ(std::memcmp(y.data(), reference.data(), out * sizeof(double)), 0)
            << "op " << static_cast<int>(op) << " on " << threads << " threads";
      }
    }
  }
}

TEST_F(Threads, GramTopIsBitwiseTheSameOnAnyThreadCount) {
  for (const auto& A : {random_matrix(2000, 600, 5), random_matrix(600, 2000, 6)}) {
    linalg::GramTop reference;
    for (int threads : {1, 2, 3}) {
      parallel::set_threads(threads);
      const linalg::GramTop g = linalg::gram_top(A, 0.25);
      if (threads == 1) {
        reference = g;
        long double trace = 0;  // trace of 0.25 A^T A = 0.25 ||A||_F^2
        for (double a : A.values()) trace += static_cast<long double>(a) * a;
        EXPECT_NEAR(g.trace, static_cast<double>(0.25L * trace), 1e-9 * g.trace);
        EXPECT_GE(g.lambda1, g.lambda2);
      } else {
        EXPECT_EQ(std::memcmp(&g.lambda1, &reference.lambda1, sizeof(double)), 0) << threads;
        EXPECT_EQ(std::memcmp(&g.lambda2, &reference.lambda2, sizeof(double)), 0) << threads;
        EXPECT_EQ(std::memcmp(&g.trace, &reference.trace, sizeof(double)), 0) << threads;
        EXPECT_EQ(std::memcmp(&g.fro2, &reference.fro2, sizeof(double)), 0) << threads;
      }
    }
  }
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// A signal of over 2^20 entries (its passes in parts of 256 rows), spread and nearly collapsed (the
// Lanczos route on a unit-norm copy), and a mixer of as many: every metric bitwise the same on 1,
// 2 and 3 threads; ||X||_F, mu and ||M||_F equal to long-double sums.
TEST_F(Threads, MetricsAreBitwiseTheSameOnAnyThreadCount) {
  Matrix spread = random_matrix(1100, 1000, 7);
  Matrix collapsed = random_matrix(1100, 1000, 8);
  const Matrix row = random_matrix(1, 1000, 9);
  for (std::size_t i = 0; i < collapsed.rows(); ++i)
    for (std::size_t j = 0; j < collapsed.cols(); ++j) collapsed(i, j) = row(0, j) + 1e-9 * collapsed(i, j);
  for (const Matrix* X : {&spread, &collapsed}) {
    long double ss = 0, c_ss = 0;
    std::vector<long double> mean(X->cols(), 0);
    for (std::size_t i = 0; i < X->rows(); ++i)
      for (std::size_t j = 0; j < X->cols(); ++j) {
        ss += static_cast<long double>((*X)(i, j)) * (*X)(i, j);
        mean[j] += (*X)(i, j) / static_cast<long double>(X->rows());
      }
    for (std::size_t i = 0; i < X->rows(); ++i)
      for (std::size_t j = 0; j < X->cols(); ++j) c_ss += ((*X)(i, j) - mean[j]) * ((*X)(i, j) - mean[j]);
    metrics::SignalMetrics reference;
    for (int threads : {1, 2, 3}) {
      parallel::set_threads(threads);
      const metrics::SignalMetrics m = metrics::signal_metrics(*X, 0.0);
      if (threads == 1) {
        reference = m;
        EXPECT_NEAR(m.fro, std::sqrt(static_cast<double>(ss)), 1e-13 * m.fro);
        EXPECT_NEAR(m.mu, std::sqrt(static_cast<double>(c_ss)), 1e-9 * m.mu);
        EXPECT_GE(m.s1, m.s2);
        continue;
      }
      const metrics::LayerRow a = metrics::to_row(m, {}), b = metrics::to_row(reference, {});
      for (std::size_t i = 0; i < metrics::n_layer_metrics; ++i)
        EXPECT_TRUE(same_bits(a[i], b[i]) || (std::isnan(a[i]) && std::isnan(b[i])))
            << metrics::layer_metric_names[i] << " on " << threads << " threads";
    }
  }
  Matrix M = random_matrix(1100, 1100, 10);  // a dominant rank-2 part: Lanczos certifies s_1, s_2 early
  for (std::size_t i = 0; i < M.rows(); ++i)
    for (std::size_t j = 0; j < M.cols(); ++j) M(i, j) += 100.0 * row(0, j % 1000) + (i % 2 ? 30.0 : -30.0);
  long double ss = 0;
  for (double m : M.values()) ss += static_cast<long double>(m) * m;
  metrics::MixerMetrics reference;
  for (int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    const metrics::MixerMetrics m = metrics::mixer_metrics(M);
    if (threads == 1) {
      reference = m;
      EXPECT_NEAR(m.m_fro, std::sqrt(static_cast<double>(ss)), 1e-13 * m.m_fro);
      continue;
    }
    EXPECT_TRUE(same_bits(m.m_fro, reference.m_fro) && same_bits(m.m_s1, reference.m_s1) &&
                same_bits(m.m_s2, reference.m_s2))
        << threads;
  }
}

}  // namespace
}  // namespace rcsweep
