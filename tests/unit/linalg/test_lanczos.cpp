// linalg::top_singular_values (Golub–Kahan–Lanczos) and linalg::top_eigenvalues (symmetric
// Lanczos) against dgesdd / dgeev and prescribed spectra.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "linalg/lanczos.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::linalg {
namespace {

Matrix gaussian(std::size_t m, std::size_t n, unsigned seed, double sd = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, sd);
  Matrix a(m, n);
  for (double& x : a.values()) x = dist(gen);
  return a;
}

// Q1 diag(s) Q2^T with Haar Q1 (m x k), Q2 (n x k): a matrix with exactly the singular values s.
Matrix with_spectrum(std::size_t m, std::size_t n, const std::vector<double>& s, unsigned seed) {
  const std::size_t k = s.size();
  const Matrix q1 = thin_q(gaussian(m, k, seed)), q2 = thin_q(gaussian(n, k, seed + 1));
  Matrix us(m, k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j) us(i, j) = q1(i, j) * s[j];
  return matmul(us, q2, Op::none, Op::trans);
}

// Row-stochastic softmax of Gaussian logits (the mixer of an attention layer).
Matrix softmax_like(std::size_t t, double logit_sd, unsigned seed, bool perp) {
  Matrix a = gaussian(t, t, seed, logit_sd);
  for (std::size_t i = 0; i < t; ++i) {
    double mx = a(i, 0), sum = 0.0;
    for (std::size_t j = 0; j < t; ++j) mx = std::max(mx, a(i, j));
    for (std::size_t j = 0; j < t; ++j) sum += a(i, j) = std::exp(a(i, j) - mx);
    for (std::size_t j = 0; j < t; ++j) a(i, j) = a(i, j) / sum - (perp ? 1.0 / static_cast<double>(t) : 0.0);
  }
  return a;
}

void expect_top_two(const Matrix& a, double rel_tol, double expect_rel_err) {
  const std::vector<double> ref = singular_values(a);
  const TopSingular r = top_singular_values(a, rel_tol, 400);
  ASSERT_TRUE(r.converged) << a.rows() << "x" << a.cols() << " after " << r.steps << " steps";
  // the certificate holds: dgesdd's values lie within the bounds (plus dgesdd's own error)
  const double slack = 64.0 * 2.2e-16 * ref[0];
  EXPECT_LE(std::abs(r.s1 - ref[0]), r.err1 + slack);
  EXPECT_LE(std::abs(r.s2 - ref[1]), r.err2 + slack);
  EXPECT_LE(r.err1, rel_tol * r.s1);
  EXPECT_LE(r.err2, std::max(rel_tol * r.s2, 16 * 2.2205e-16 * r.s1));
  // and the values themselves are as accurate as the metrics need
  EXPECT_NEAR(r.s1, ref[0], expect_rel_err * ref[0]);
  // (s2 of a collapsed matrix is determined only to ~eps s1 by any backward-stable method)
  EXPECT_NEAR(r.s2, ref[1], expect_rel_err * ref[1] + slack);
  // Ritz values never exceed the singular values they approximate (interlacing)
  EXPECT_LE(r.s1, ref[0] * (1 + 1e-14));
}

TEST(TopSingular, GaussianMatricesOfEveryShape) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{2, 2},
                      {3, 7},
                      {7, 3},
                      {20, 20},
                      {40, 200},
                      {200, 40},
                      {150, 750},
                      {300, 300}})
    expect_top_two(gaussian(m, n, static_cast<unsigned>(m * 1000 + n)), 1e-13, 1e-13);
}

TEST(TopSingular, PrescribedSpectraIncludingClustersAndCollapse) {
  const std::size_t k = 60;
  std::vector<double> s(k);
  // a well separated top pair; a cluster (s2 - s3 = 1e-6); a collapsed signal (s2 / s1 = 1e-6)
  for (std::size_t i = 0; i < k; ++i) s[i] = 1.0 / static_cast<double>(i + 1);
  expect_top_two(with_spectrum(80, 120, s, 1), 1e-13, 1e-13);
  s[2] = s[1] - 1e-6;
  expect_top_two(with_spectrum(80, 120, s, 2), 1e-13, 1e-13);
  for (std::size_t i = 1; i < k; ++i) s[i] = 1e-6 / static_cast<double>(i);
  expect_top_two(with_spectrum(120, 80, s, 3), 1e-13, 1e-13);
}

TEST(TopSingular, RepeatedAndExactlyLowRankMatrices) {
  // identity: every singular value 1, the Krylov space of any start vector is one-dimensional
  const TopSingular id = top_singular_values(Matrix::identity(50), 1e-13, 400);
  ASSERT_TRUE(id.converged);
  EXPECT_NEAR(id.s1, 1.0, 1e-14);
  EXPECT_NEAR(id.s2, 1.0, 1e-14);
  // rank one (the uniform mixer): s2 = 0
  const TopSingular one = top_singular_values(Matrix(40, 40, 1.0 / 40.0), 1e-13, 400);
  ASSERT_TRUE(one.converged);
  EXPECT_NEAR(one.s1, 1.0, 1e-14);
  EXPECT_NEAR(one.s2, 0.0, 1e-14);
  // a repeated top pair
  std::vector<double> s{3.0, 3.0, 1.0, 0.5, 0.25};
  expect_top_two(with_spectrum(30, 20, s, 4), 1e-13, 1e-13);
}

TEST(TopSingular, AttentionMixers) {
  for (bool perp : {false, true})
    for (double sd : {0.1, 1.0, 3.0}) expect_top_two(softmax_like(256, sd, 7, perp), 1e-13, 1e-13);
}

TEST(TopSingular, TinyShapesAndStepLimit) {
  const TopSingular r1 = top_singular_values(Matrix(1, 5, 2.0), 1e-13, 10);
  ASSERT_TRUE(r1.converged);
  EXPECT_NEAR(r1.s1, 2.0 * std::sqrt(5.0), 1e-14);
  EXPECT_EQ(r1.s2, 0.0);
  // a step limit too small for the tolerance reports no convergence
  const TopSingular r2 = top_singular_values(gaussian(300, 300, 9), 1e-13, 3);
  EXPECT_FALSE(r2.converged);
  EXPECT_EQ(r2.steps, 3);
}

// Q diag(l) Q^T with Haar Q (n x n): a symmetric matrix with exactly the eigenvalues l.
Matrix symmetric_with_spectrum(const std::vector<double>& l, unsigned seed) {
  const std::size_t n = l.size();
  const Matrix q = thin_q(gaussian(n, n, seed));
  Matrix ql(n, n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) ql(i, j) = q(i, j) * l[j];
  Matrix s = matmul(ql, q, Op::none, Op::trans);
  for (std::size_t i = 0; i < n; ++i)  // exactly symmetric, as a Gram matrix from dsyrk is
    for (std::size_t j = i + 1; j < n; ++j) s(j, i) = s(i, j);
  return s;
}

Matrix gram(const Matrix& a) {
  Matrix g = matmul(a, a, Op::none, Op::trans);
  for (std::size_t i = 0; i < g.rows(); ++i)
    for (std::size_t j = i + 1; j < g.rows(); ++j) g(j, i) = g(i, j);
  return g;
}

// The certificate and the accuracy of top_eigenvalues against dgeev's eigenvalues of S.
void expect_top_eigenvalues(const Matrix& S, double rel_tol, double expect_rel_err) {
  std::vector<double> ref;
  for (const auto& z : eigenvalues(S)) ref.push_back(z.real());
  std::sort(ref.begin(), ref.end(), std::greater<>());
  Matrix upper = S;  // only the upper triangle may be read
  for (std::size_t i = 0; i < S.rows(); ++i)
    for (std::size_t j = 0; j < i; ++j) upper(i, j) = std::numeric_limits<double>::quiet_NaN();
  const TopSingular r = top_eigenvalues(upper, rel_tol, 400);
  ASSERT_TRUE(r.converged) << S.rows() << " after " << r.steps << " steps";
  double norm = 0.0;
  for (double x : ref) norm = std::max(norm, std::abs(x));
  const double slack = 64.0 * 2.2e-16 * norm;  // dgeev's own error
  EXPECT_LE(std::abs(r.s1 - ref[0]), r.err1 + slack);
  EXPECT_LE(std::abs(r.s2 - ref[1]), r.err2 + slack);
  EXPECT_LE(r.err1, std::max(rel_tol * std::abs(r.s1), 16 * 2.2205e-16 * norm));
  EXPECT_LE(r.err2, std::max(rel_tol * std::abs(r.s2), 16 * 2.2205e-16 * norm));
  EXPECT_NEAR(r.s1, ref[0], expect_rel_err * std::abs(ref[0]) + slack);
  EXPECT_NEAR(r.s2, ref[1], expect_rel_err * std::abs(ref[1]) + slack);
  EXPECT_LE(r.s1, ref[0] + slack);  // Ritz values interlace: never above the eigenvalue
  EXPECT_LE(r.s2, ref[1] + slack);
}

TEST(TopEigenvalues, GramMatricesOfGaussianSignals) {
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 7}, {20, 20}, {40, 200}, {150, 750}, {300, 300}})
    expect_top_eigenvalues(gram(gaussian(m, n, static_cast<unsigned>(7 * m + n))), 1e-13, 1e-13);
}

TEST(TopEigenvalues, PrescribedSpectraClustersRepeatsAndNegatives) {
  const std::size_t n = 80;
  std::vector<double> l(n);
  for (std::size_t i = 0; i < n; ++i) l[i] = 1.0 / static_cast<double>(i + 1);
  expect_top_eigenvalues(symmetric_with_spectrum(l, 11), 1e-13, 1e-13);
  l[2] = l[1] - 1e-7;  // a cluster below lambda_2
  expect_top_eigenvalues(symmetric_with_spectrum(l, 12), 1e-13, 1e-13);
  l[1] = l[0];  // a repeated top pair
  expect_top_eigenvalues(symmetric_with_spectrum(l, 13), 1e-13, 1e-13);
  for (std::size_t i = 0; i < n; i += 2) l[i] = -2.0 * l[i];  // indefinite: the largest, not |.|
  expect_top_eigenvalues(symmetric_with_spectrum(l, 14), 1e-13, 1e-13);
  // exactly rank two (a collapsed signal's Gram matrix): lambda_3.. = 0
  std::vector<double> two(n, 0.0);
  two[0] = 5.0;
  two[1] = 1e-2;
  expect_top_eigenvalues(symmetric_with_spectrum(two, 15), 1e-13, 1e-13);
}

// A dominant eigenvalue far above a dense bulk with a soft edge (like the Gram matrix of a Markov
// layer's output, lambda_1 / lambda_2 ~ 45): certified within the step budget gram_top gives it.
TEST(TopEigenvalues, DominantEigenvalueAboveADenseBulk) {
  const std::size_t n = 400;
  std::vector<double> l(n);
  l[0] = 45.0;
  for (std::size_t i = 1; i < n; ++i) {
    const double x = static_cast<double>(i) / static_cast<double>(n);
    l[i] = (1.0 - x) * (1.0 - x);  // a bulk with a soft edge at 1
  }
  Matrix S = symmetric_with_spectrum(l, 16);
  const TopSingular r = top_eigenvalues(S, 1e-13, 200);
  ASSERT_TRUE(r.converged) << r.steps;
  EXPECT_LE(r.steps, 150);
  expect_top_eigenvalues(S, 1e-13, 1e-13);
}

TEST(TopEigenvalues, IdentityTinyShapesAndStepLimit) {
  const TopSingular id = top_eigenvalues(Matrix::identity(50), 1e-13, 400);
  ASSERT_TRUE(id.converged);
  EXPECT_NEAR(id.s1, 1.0, 1e-14);
  EXPECT_NEAR(id.s2, 1.0, 1e-14);
  const TopSingular one = top_eigenvalues(Matrix(1, 1, 3.0), 1e-13, 10);
  ASSERT_TRUE(one.converged);
  EXPECT_EQ(one.s1, 3.0);
  EXPECT_EQ(one.s2, 0.0);
  const TopSingular r = top_eigenvalues(gram(gaussian(300, 300, 9)), 1e-13, 3);
  EXPECT_FALSE(r.converged);
  EXPECT_THROW(top_eigenvalues(Matrix(3, 2), 1e-13, 10), Error);
}

// lambda_1 of a nearly rank-one PSD matrix by the quadratic bound: certified in a few steps, the
// bound holds against dgeev's value, and the value is within 1e-13 relative; a matrix whose
// spectrum is not dominated by lambda_1 (theta_1^2 <= fro2 / 2) is given up after 3 steps.
TEST(TopEigenvaluePsd, NearlyRankOneIsCertifiedInAFewStepsAndTheRestGivenUp) {
  const auto sums = [](const Matrix& S) {
    double trace = 0.0, fro2 = 0.0;
    for (std::size_t i = 0; i < S.rows(); ++i) {
      trace += S(i, i);
      for (std::size_t j = 0; j < S.cols(); ++j) fro2 += S(i, j) * S(i, j);
    }
    return std::pair{trace, fro2};
  };
  for (std::size_t n : {std::size_t{32}, std::size_t{60}, std::size_t{150}})
    for (double ratio : {0.3, 0.1, 1e-3, 1e-6, 1e-12, 0.0}) {
      std::vector<double> l(n);
      for (std::size_t i = 0; i < n; ++i) l[i] = i == 0 ? 2.5 : 2.5 * ratio * std::pow(0.9, static_cast<double>(i));
      const Matrix S = symmetric_with_spectrum(l, static_cast<unsigned>(static_cast<double>(n) + 1000 * ratio));
      std::vector<double> ref;
      for (const auto& z : eigenvalues(S)) ref.push_back(z.real());
      const double l1 = *std::max_element(ref.begin(), ref.end());
      const auto [trace, fro2] = sums(S);
      const TopSingular r = top_eigenvalue_psd(S, trace, fro2, 1e-13, 12);
      SCOPED_TRACE(testing::Message() << "n = " << n << ", lambda_2 / lambda_1 = " << ratio);
      ASSERT_TRUE(r.converged) << r.steps << " steps";
      EXPECT_LE(r.steps, ratio >= 0.1 ? 12 : 6);
      EXPECT_LE(std::abs(r.s1 - l1), r.err1 + 64 * 2.2e-16 * l1);  // the certificate holds
      EXPECT_LE(r.err1, 1e-13 * r.s1 + 16 * 2.2205e-16 * l1);
      EXPECT_NEAR(r.s1, l1, 1e-13 * l1);
    }
  // A Gaussian signal's Gram matrix (spread spectrum) and the identity: given up after 3 steps.
  for (const Matrix& S : {gram(gaussian(60, 200, 5)), Matrix::identity(60)}) {
    const auto [trace, fro2] = sums(S);
    const TopSingular r = top_eigenvalue_psd(S, trace, fro2, 1e-13, 12);
    EXPECT_FALSE(r.converged);
    EXPECT_EQ(r.steps, 3);
  }
  // The bound needs a gap: an exactly repeated top pair is never certified by it.
  std::vector<double> pair(40, 0.0);
  pair[0] = pair[1] = 1.0;
  const Matrix P = symmetric_with_spectrum(pair, 77);
  const auto [trace, fro2] = sums(P);
  EXPECT_FALSE(top_eigenvalue_psd(P, trace, fro2, 1e-13, 12).converged);
}

// gram_top switches to Lanczos on the Gram matrix from gram_lanczos_min_order on: the same two
// eigenvalues (= s_1^2, s_2^2 of A) as the SVD gives, to 1e-12 relative, for tall and wide A.
TEST(TopSingular, GramTopOfLargeOrderMatchesTheSvd) {
  const std::size_t k = gram_lanczos_min_order;
  for (auto [m, n] : {std::pair{k, 2 * k}, std::pair{2 * k, k}}) {
    const Matrix a = gaussian(m, n, static_cast<unsigned>(m + 3 * n));
    const std::vector<double> s = singular_values(a);
    const GramTop g = gram_top(a);
    ASSERT_TRUE(g.solved);
    EXPECT_NEAR(g.lambda1, s[0] * s[0], 1e-12 * s[0] * s[0]);
    EXPECT_NEAR(g.lambda2, s[1] * s[1], 1e-12 * s[1] * s[1]);
    double trace = 0.0;
    for (double x : s) trace += x * x;
    EXPECT_NEAR(g.trace, trace, 1e-12 * trace);
  }
}

}  // namespace
}  // namespace rcsweep::linalg
