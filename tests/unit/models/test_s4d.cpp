// The S4D kernels (src/models/s4d.cpp) against the plain loops they replace: the register-blocked
// causal convolution, its transpose, the vectorised kernel build and max ||M^(c)||_F must give
// the same bits as the scalar code, for every instruction set this machine has, at shapes that
// are not multiples of the tile sizes (4 channels x 6 or 3 rows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "config/params.hpp"
#include "model_fixtures.hpp"
#include "models/random_source.hpp"
#include "models/s4d.hpp"

namespace rcsweep {
namespace {
using models::detail::S4dIsa;

std::vector<S4dIsa> isas() {
  std::vector<S4dIsa> v{S4dIsa::portable};
  if (models::detail::s4d_isa_available(S4dIsa::avx2)) v.push_back(S4dIsa::avx2);
  return v;
}

const char* isa_name(S4dIsa isa) { return isa == S4dIsa::avx2 ? "avx2" : "portable"; }

Matrix gaussian(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  Matrix A(rows, cols);
  for (double& a : A.values()) a = dist(gen);
  return A;
}

// A decaying kernel like S4D's (K[k] ~ exp(-k / 30) with signs), so that late terms are small
// against early ones and the order of the sum matters in the last bits.
Matrix decaying_kernel(std::size_t T, std::size_t d, unsigned seed) {
  Matrix K = gaussian(T, d, seed);
  for (std::size_t k = 0; k < T; ++k)
    for (double& x : K.row(k)) x *= std::exp(-static_cast<double>(k) / 30.0);
  return K;
}

// Bitwise equal, except that a NaN only has to be a NaN (its sign and payload depend on the
// operand order of a multiply, which the compiler is free to swap in either code).
::testing::AssertionResult same_bits(const Matrix& got, const Matrix& want) {
  if (got.rows() != want.rows() || got.cols() != want.cols()) return ::testing::AssertionFailure() << "shape differs";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got.data()[i], w = want.data()[i];
    if (std::isnan(g) && std::isnan(w)) continue;
    if (std::memcmp(&g, &w, sizeof g) != 0)
      return ::testing::AssertionFailure() << "entry (" << i / got.cols() << ", " << i % got.cols() << "): " << g
                                           << " vs " << w << " (difference " << g - w << ")";
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::size_t> Ts = {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 18, 19, 31, 64, 97};
const std::vector<std::size_t> ds = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16};

TEST(S4d, MixIsBitwiseTheScalarLoop) {
  struct Coeffs {
    double alpha, beta;
  };
  const std::vector<Coeffs> coeffs = {{1.0, 0.0}, {0.7, 0.25}, {-1.5, 1.0}, {0.0, 1.0}, {1.0, -0.3}};
  unsigned seed = 1;
  for (S4dIsa isa : isas())
    for (std::size_t T : Ts)
      for (std::size_t d : ds)
        for (const Coeffs& c : coeffs) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " T=" + std::to_string(T) + " d=" + std::to_string(d) +
                       " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta));
          const Matrix K = decaying_kernel(T, d, ++seed), X = gaussian(T, d, ++seed), acc0 = gaussian(T, d, ++seed);
          Matrix want = acc0, got = acc0;
          models::detail::s4d_mix_reference(K, X, c.alpha, c.beta, want);
          models::detail::s4d_mix_direct(isa, K, X, c.alpha, c.beta, got);
          ASSERT_TRUE(same_bits(got, want));
        }
}

TEST(S4d, MixLargerShapesAndTheDispatchedKernel) {
  for (auto [T, d] : {std::pair<std::size_t, std::size_t>{300, 37}, {256, 64}, {131, 9}}) {
    SCOPED_TRACE("T=" + std::to_string(T) + " d=" + std::to_string(d));
    const Matrix K = decaying_kernel(T, d, 5), X = gaussian(T, d, 6), acc0 = gaussian(T, d, 7);
    Matrix want = acc0;
    models::detail::s4d_mix_reference(K, X, 0.9, 0.5, want);
    for (S4dIsa isa : isas()) {
      Matrix got = acc0;
      models::detail::s4d_mix_direct(isa, K, X, 0.9, 0.5, got);
      EXPECT_TRUE(same_bits(got, want)) << isa_name(isa);
    }
    Matrix got = acc0;
    models::s4d_mix(K, X, 0.9, 0.5, got);
    EXPECT_TRUE(same_bits(got, want)) << "dispatched";
  }
}

// A kernel with more rows than T (only the first T are used), and shape errors.
TEST(S4d, MixUsesTheFirstTRowsOfKAndChecksShapes) {
  const Matrix Klong = decaying_kernel(20, 6, 3), X = gaussian(14, 6, 4);
  Matrix Kshort(14, 6);
  for (std::size_t k = 0; k < 14; ++k)
    for (std::size_t c = 0; c < 6; ++c) Kshort(k, c) = Klong(k, c);
  Matrix want(14, 6), got(14, 6);
  models::detail::s4d_mix_reference(Kshort, X, 1.0, 0.0, want);
  models::s4d_mix(Klong, X, 1.0, 0.0, got);
  EXPECT_TRUE(same_bits(got, want));
  Matrix wrong(14, 5);
  EXPECT_THROW(models::s4d_mix(Klong, X, 1.0, 0.0, wrong), Error);
  EXPECT_THROW(models::s4d_mix(Matrix(13, 6), X, 1.0, 0.0, got), Error);
  EXPECT_THROW(models::s4d_mix_transpose(Matrix(14, 7), X), Error);
}

// Infinities and NaNs in K, X and acc propagate as in the scalar loop (inf * 0 = NaN, inf - inf =
// NaN, beta = 0 still multiplies a NaN in acc), in every tile position.
TEST(S4d, MixNonFiniteInputs) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (S4dIsa isa : isas())
    for (std::size_t T : {1, 5, 13, 40})
      for (std::size_t d : {1, 3, 6}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " T=" + std::to_string(T) + " d=" + std::to_string(d));
        Matrix K = decaying_kernel(T, d, 11), X = gaussian(T, d, 12), acc0 = gaussian(T, d, 13);
        K(T / 2, 0) = inf;
        K(T - 1, d - 1) = -inf;
        X(T / 3, d / 2) = nan;
        X(T - 1, 0) = inf;
        X(0, d - 1) = 0.0;
        acc0(T / 2, d - 1) = nan;
        acc0(0, 0) = inf;
        for (double beta : {0.0, 1.0}) {
          Matrix want = acc0, got = acc0;
          models::detail::s4d_mix_reference(K, X, 1.0, beta, want);
          models::detail::s4d_mix_direct(isa, K, X, 1.0, beta, got);
          EXPECT_TRUE(same_bits(got, want)) << "beta " << beta;
        }
        const Matrix want = models::detail::s4d_mix_transpose_reference(K, X);
        Matrix got(T, d);
        models::detail::s4d_mix_transpose_direct(isa, K, X, got);
        EXPECT_TRUE(same_bits(got, want)) << "transpose";
      }
}

// Signed zeros: the sums start from +0 like the scalar loop's, so an all-zero product stays +0.
TEST(S4d, MixZeroSigns) {
  for (S4dIsa isa : isas()) {
    Matrix K(9, 5, -0.0), X(9, 5, 0.0), acc0(9, 5, -0.0);
    for (double beta : {0.0, 1.0}) {
      Matrix want = acc0, got = acc0;
      models::detail::s4d_mix_reference(K, X, -1.0, beta, want);
      models::detail::s4d_mix_direct(isa, K, X, -1.0, beta, got);
      EXPECT_TRUE(same_bits(got, want)) << isa_name(isa) << " beta " << beta;
    }
    Matrix got(9, 5);
    models::detail::s4d_mix_transpose_direct(isa, K, X, got);
    EXPECT_TRUE(same_bits(got, models::detail::s4d_mix_transpose_reference(K, X))) << isa_name(isa);
  }
}

TEST(S4d, TransposeIsBitwiseTheScalarLoop) {
  unsigned seed = 100;
  for (S4dIsa isa : isas())
    for (std::size_t T : Ts)
      for (std::size_t d : ds) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " T=" + std::to_string(T) + " d=" + std::to_string(d));
        const Matrix K = decaying_kernel(T, d, ++seed), G = gaussian(T, d, ++seed);
        const Matrix want = models::detail::s4d_mix_transpose_reference(K, G);
        Matrix got(T, d, 12345.0);  // overwritten, not accumulated into
        models::detail::s4d_mix_transpose_direct(isa, K, G, got);
        ASSERT_TRUE(same_bits(got, want));
      }
  const Matrix K = decaying_kernel(300, 37, 1), G = gaussian(300, 37, 2);
  EXPECT_TRUE(same_bits(models::s4d_mix_transpose(K, G), models::detail::s4d_mix_transpose_reference(K, G)));
}

// The transpose is the adjoint: <G, conv(X)> = <transpose(G), X> (up to rounding).
TEST(S4d, TransposeIsTheAdjoint) {
  const std::size_t T = 50, d = 7;
  const Matrix K = decaying_kernel(T, d, 21), X = gaussian(T, d, 22), G = gaussian(T, d, 23);
  Matrix O(T, d);
  models::s4d_mix(K, X, 1.0, 0.0, O);
  const Matrix Gt = models::s4d_mix_transpose(K, G);
  double lhs = 0, rhs = 0, scale = 0;
  for (std::size_t i = 0; i < O.size(); ++i) {
    lhs += G.data()[i] * O.data()[i];
    rhs += Gt.data()[i] * X.data()[i];
    scale += std::abs(G.data()[i] * O.data()[i]) + std::abs(Gt.data()[i] * X.data()[i]);
  }
  EXPECT_NEAR(lhs, rhs, 1e-13 * scale);
}

TEST(S4d, KernelsAndMaxFroAreBitwiseTheScalarLoops) {
  for (S4dIsa isa : isas())
    for (auto [T, d, N] :
         {std::tuple{1, 1, 1}, {7, 3, 3}, {6, 9, 4}, {33, 5, 5}, {64, 8, 16}, {100, 13, 7}, {5, 4, 17}}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " T=" + std::to_string(T) + " d=" + std::to_string(d) +
                   " N=" + std::to_string(N));
      auto m = test::small_model(config::Mixer::s4d, T, d);
      m.state_dim = N;
      models::RandomSource random(31, 0, T, d);
      Matrix got;
      models::detail::s4d_kernels_build(isa, m, 2, random, got);
      const Matrix want = models::detail::s4d_kernels_reference(m, 2, random);
      ASSERT_TRUE(same_bits(got, want));
      if (isa == models::detail::s4d_isa()) {
        EXPECT_TRUE(same_bits(models::s4d_kernels(m, 2, random), want));
      }
      const double fro = models::s4d_max_fro(got), fro_ref = models::detail::s4d_max_fro_reference(want);
      EXPECT_EQ(std::memcmp(&fro, &fro_ref, sizeof fro), 0) << fro << " vs " << fro_ref;
    }
}

}  // namespace
}  // namespace rcsweep
