// One layer against a naive reference and the structural properties MODELS.md and the papers state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "linalg/linalg.hpp"
#include "model_fixtures.hpp"
#include "models/layer.hpp"

namespace rcsweep {
namespace {
using config::ModelParams;
using models::RandomSource;

using test::small_model;

TEST(Input, OrthonormalRowsAreOrthonormal) {
  auto m = small_model(config::Mixer::softmax, 7, 11);
  RandomSource random(1, 0, m.T, m.d);
  const Matrix X = models::make_input(m, random);
  const Matrix G = test::naive_matmul(X, test::naive_transpose(X));
  EXPECT_LT(test::max_abs_diff(G, Matrix::identity(7)), 1e-13);  // X_0 X_0^T = I_T
}

TEST(Input, SphereRowsHaveUnitNormAndGaussianHasVariance1OverD) {
  auto m = small_model(config::Mixer::softmax, 50, 400);
  m.input = config::InputKind::sphere;
  RandomSource random(1, 0, m.T, m.d);
  const Matrix S = models::make_input(m, random);
  for (std::size_t i = 0; i < S.rows(); ++i) {
    double ss = 0;
    for (double x : S.row(i)) ss += x * x;
    EXPECT_NEAR(ss, 1.0, 1e-13);
  }
  m.input = config::InputKind::gaussian;
  const Matrix G = models::make_input(m, random);
  double ss = 0;
  for (double x : G.values()) ss += x * x;
  // mean of x^2 is 1/d; 20000 samples: relative standard error sqrt(2/20000) = 1%.
  EXPECT_NEAR(ss / static_cast<double>(G.size()) * m.d, 1.0, 0.05);
}

TEST(Mixer, SoftmaxAndMarkovAreRowStochasticWithEigenvalueOne) {
  for (auto mixer : {config::Mixer::softmax, config::Mixer::markov}) {
    auto m = small_model(mixer, 12, 16);
    RandomSource random(3, 1, m.T, m.d);
    const Matrix X = models::make_input(m, random);
    const Matrix M = models::mixer_matrix(m, 1, 0, X, random);
    for (std::size_t i = 0; i < M.rows(); ++i) {
      double sum = 0;
      for (double a : M.row(i)) {
        EXPECT_GT(a, 0.0);
        sum += a;
      }
      EXPECT_NEAR(sum, 1.0, 1e-14);  // M 1 = 1: eigenvalue 1 with eigenvector 1
    }
  }
}

TEST(Mixer, PerpRowsSumToZero) {
  auto m = small_model(config::Mixer::markov, 10, 10);
  RandomSource random(3, 1, m.T, m.d);
  Matrix M = models::mixer_matrix(m, 1, 0, Matrix(10, 10), random);
  models::apply_gap_fix(config::GapFix::perp, M);
  for (std::size_t i = 0; i < M.rows(); ++i) {
    double sum = 0;
    for (double a : M.row(i)) sum += a;
    EXPECT_NEAR(sum, 0.0, 1e-15);
  }
}

TEST(Mixer, SoftmaxMatchesNaiveFormula) {
  auto m = small_model(config::Mixer::softmax, 5, 8);
  m.d_qk = 3;
  m.sigma_qk = 0.7;
  RandomSource random(9, 0, m.T, m.d);
  const Matrix X = models::make_input(m, random);
  const Matrix M = models::mixer_matrix(m, 2, 1, X, random);
  // Mind the Gap eq. (1) with W = sigma_qk * (standard normals of the keyed streams).
  Matrix WQ = random.normal(2, rng::Tensor::query, 1, 8, 3), WK = random.normal(2, rng::Tensor::key, 1, 8, 3);
  for (double& w : WQ.values()) w *= 0.7;
  for (double& w : WK.values()) w *= 0.7;
  const Matrix S = test::naive_matmul(test::naive_matmul(X, WQ), test::naive_transpose(test::naive_matmul(X, WK)));
  for (std::size_t i = 0; i < 5; ++i) {
    double z = 0;
    for (std::size_t j = 0; j < 5; ++j) z += std::exp(S(i, j) / std::sqrt(3.0));
    for (std::size_t j = 0; j < 5; ++j) EXPECT_NEAR(M(i, j), std::exp(S(i, j) / std::sqrt(3.0)) / z, 1e-14);
  }
}

// qk_product (chosen by the plan): the logits through the shared P = W_Q W_K^T are the same
// attention map as through Q K^T, to rounding, for every attention mixer and d_qk <= d.
TEST(Mixer, SharedQueryKeyProductGivesTheSameMixer) {
  for (auto mixer : {config::Mixer::softmax, config::Mixer::relu, config::Mixer::sigmoid})
    for (int dqk : {5, 24}) {
      auto m = small_model(mixer, 20, 24);
      m.d_qk = dqk;
      m.sigma_qk = 0.4;
      RandomSource random(9, 0, m.T, m.d);
      const Matrix X = models::make_input(m, random);
      m.qk_product = false;
      const Matrix direct = models::mixer_matrix(m, 3, 0, X, random);
      m.qk_product = true;
      const Matrix shared = models::mixer_matrix(m, 3, 0, X, random);
      EXPECT_LT(test::max_abs_diff(direct, shared), 1e-14);
      EXPECT_NE(direct, shared);  // a different route (bitwise), not the same code
    }
}

TEST(Mixer, SoftmaxIsStableForHugeLogits) {
  Matrix S(2, 3);
  S(0, 0) = 1000;
  S(0, 1) = 999;
  S(0, 2) = -1e300;
  S(1, 0) = S(1, 1) = S(1, 2) = 5e307;
  models::softmax_rows(S);
  EXPECT_NEAR(S(0, 0), 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(S(0, 2), 0.0);
  EXPECT_NEAR(S(1, 1), 1.0 / 3, 1e-15);
}

TEST(Norm, RmsAndLayerNormMatchDefinitions) {
  Matrix Y(2, 4);
  const double v[] = {1, 2, 3, 4, -1, 0.5, 0, 2};
  std::copy(v, v + 8, Y.data());
  Matrix R = Y, L = Y;
  models::apply_norm(config::Norm::rms, R);
  EXPECT_NEAR(R(0, 3), 4 / std::sqrt(30.0), 1e-15);  // lambda-skip eq. (4)
  models::apply_norm(config::Norm::layernorm, L);
  // row 0: mean 2.5, biased variance 1.25
  EXPECT_NEAR(L(0, 0), (1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-15);
}

// The whole layer against a direct evaluation of MODELS.md "One layer", with two heads, a skip,
// skip_scale, perp and LayerNorm.
TEST(Layer, MatchesNaiveReference) {
  auto m = small_model(config::Mixer::softmax, 6, 9);
  m.heads = 2;
  m.lambda = -0.7;
  m.skip_scale = 0.3;
  m.sigma_v = 1.3;
  m.gap_fix = config::GapFix::perp;
  m.norm = config::Norm::layernorm;
  RandomSource random(5, 2, m.T, m.d);
  const Matrix X0 = models::make_input(m, random);

  Matrix expect(6, 9);
  for (int h = 0; h < 2; ++h) {
    Matrix M = models::mixer_matrix(m, 1, h, X0, random);
    models::apply_gap_fix(m.gap_fix, M);
    Matrix W = random.normal(1, rng::Tensor::value, h, 9, 9);
    for (double& w : W.values()) w *= 1.3;
    const Matrix O = test::naive_matmul(test::naive_matmul(M, X0), W);
    for (std::size_t i = 0; i < O.size(); ++i) expect.data()[i] += 0.3 * O.data()[i];
  }
  for (std::size_t i = 0; i < expect.size(); ++i) expect.data()[i] += -0.7 * X0.data()[i];
  models::apply_norm(m.norm, expect);

  Matrix X = X0;
  metrics::MixerMetrics mm;
  models::LayerStats stats;
  models::apply_layer(m, 1, random, X, &stats);
  mm = stats.head0;
  EXPECT_LT(test::max_abs_diff(X, expect), 1e-12);
  EXPECT_TRUE(std::isfinite(mm.m_s1));
}

// A T x T allocation lent to the layer (LayerScratch, reused from layer to layer by run_bundle) is
// invisible in the results whatever it holds (NaN garbage, a larger or a smaller matrix): the mixer
// built in it is every entry written. The task's own mixer comes back in it; a mixer shared through
// the cache leaves it alone. Each layer reports its layer_stages stages exactly once.
TEST(Layer, LentMixerAllocationIsReusedAndInvisible) {
  for (const auto mixer : {config::Mixer::softmax, config::Mixer::ssd, config::Mixer::markov, config::Mixer::s4d}) {
    auto m = small_model(mixer, 12, 9);
    m.heads = mixer == config::Mixer::s4d ? 1 : 2;
    m.gap_fix = mixer == config::Mixer::s4d ? config::GapFix::none : config::GapFix::perp;
    m.norm = config::Norm::layernorm;
    m.lambda = 1.0;
    m.input = config::InputKind::sphere;
    RandomSource random(5, 2, m.T, m.d);
    const Matrix X0 = models::make_input(m, random);
    Matrix expect = X0;
    models::LayerStats expect_stats;
    models::apply_layer(m, 1, random, expect, &expect_stats);
    for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{12, 12}, {30, 20}, {3, 4}, {0, 0}}) {
      models::LayerScratch lent{Matrix(rows, cols, std::nan("")), {}};
      int stages = 0;
      lent.stage_done = [&] { ++stages; };
      Matrix X = X0;
      models::LayerStats stats;
      models::apply_layer(m, 1, random, X, &stats, {}, nullptr, &lent);
      EXPECT_EQ(X, expect) << static_cast<int>(mixer) << ": lent " << rows << " x " << cols;
      EXPECT_EQ(std::memcmp(&stats.head0, &expect_stats.head0, sizeof stats.head0), 0);
      EXPECT_EQ(stages, models::layer_stages);
      if (m.input_dependent_mixer()) {  // the task's own mixer, given back
        EXPECT_EQ(lent.mixer.rows(), 12u);
        EXPECT_EQ(lent.mixer.cols(), 12u);
      } else {
        EXPECT_EQ(lent.mixer.rows(), rows);
      }
    }
  }
}

TEST(Layer, OrthogonalValuesAreOrthogonalAndIdentityValuesSkipTheProduct) {
  auto m = small_model(config::Mixer::identity, 4, 8);
  m.value_init = config::ValueInit::orthogonal;
  m.sigma_v = 2.0;
  RandomSource random(5, 0, m.T, m.d);
  Matrix scratch;
  const Matrix& W = models::value_weight(m, 1, 0, random, scratch);
  const Matrix G = test::naive_matmul(test::naive_transpose(W), W);
  Matrix four = Matrix::identity(8);
  for (double& x : four.values()) x *= 4.0;
  EXPECT_LT(test::max_abs_diff(G, four), 1e-12);

  m.value_init = config::ValueInit::identity;
  m.lambda = 1.0;
  Matrix X = models::make_input(m, random);
  const Matrix X0 = X;
  models::apply_layer(m, 1, random, X, nullptr);  // identity mixer, W_V = 2 I: X + 2 X = 3 X
  for (std::size_t i = 0; i < X.size(); ++i) EXPECT_NEAR(X.data()[i], 3 * X0.data()[i], 1e-15);
}

}  // namespace
}  // namespace rcsweep
