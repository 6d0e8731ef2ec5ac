// Gradient norms g_{L,l} = ||dX_L/dW_{V,l}||_F^2 (MODELS.md "Gradient norms"): the hand-written
// reverse pass against central finite differences of an independent naive forward pass (every
// mixer and component), the exact Kronecker route against the full Jacobian, Hutchinson against
// both, and Mind the Gap Lemma A.2 / Prop. 3.6 / Fig. 5.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "linalg/linalg.hpp"
#include "model_fixtures.hpp"
#include "models/gradients.hpp"
#include "models/layer.hpp"
#include "models/task_runner.hpp"
#include "rng/philox.hpp"

namespace rcsweep {
namespace {
using config::Mixer;
using config::ModelParams;
using models::LayerTape;
using models::RandomSource;
using models::TaskTape;
using test::naive_matmul;
using test::naive_transpose;

double frobenius_dot(const Matrix& A, const Matrix& B) {
  double s = 0.0;
  for (std::size_t i = 0; i < A.size(); ++i) s += A.data()[i] * B.data()[i];
  return s;
}

void naive_norm(config::Norm norm, Matrix& Y) {
  const double d = static_cast<double>(Y.cols());
  for (std::size_t i = 0; i < Y.rows(); ++i) {
    auto row = Y.row(i);
    if (norm == config::Norm::rms) {
      double ss = 0.0;
      for (double y : row) ss += y * y;
      for (double& y : row) y /= std::sqrt(ss);
    } else if (norm == config::Norm::layernorm) {
      double mean = 0.0, var = 0.0;
      for (double y : row) mean += y / d;
      for (double y : row) var += (y - mean) * (y - mean) / d;
      for (double& y : row) y = (y - mean) / std::sqrt(var + 1e-5);
    }
  }
}

// The mixer of an input-dependent head recomputed from its weights (formulas of MODELS.md).
Matrix naive_mixer(const ModelParams& m, const models::HeadTape& h, const Matrix& X) {
  const std::size_t T = X.rows();
  Matrix M;
  if (m.mixer == Mixer::ssd) {
    M = m.bc_init == config::BcInit::identity
            ? naive_matmul(X, naive_transpose(X))
            : naive_matmul(naive_matmul(X, h.W_C), naive_transpose(naive_matmul(X, h.W_B)));
    for (std::size_t j = 0; j < T; ++j)
      for (std::size_t i = 0; i < T; ++i) M(j, i) = i <= j ? M(j, i) * std::pow(m.alpha, double(j - i)) : 0.0;
  } else {
    M = naive_matmul(naive_matmul(X, h.W_Q), naive_transpose(naive_matmul(X, h.W_K)));
    for (double& s : M.values()) s *= m.sigma_qk * m.sigma_qk / std::sqrt(double(m.d_qk));
    for (std::size_t i = 0; i < T; ++i) {
      auto row = M.row(i);
      if (m.mixer == Mixer::softmax) {
        double mx = row[0], sum = 0.0;
        for (double s : row) mx = std::max(mx, s);
        for (double& s : row) sum += (s = std::exp(s - mx));
        for (double& s : row) s /= sum;
      } else if (m.mixer == Mixer::relu) {
        for (double& s : row) s = std::max(s, 0.0) / double(T);
      } else {
        for (double& s : row) s = 1.0 / (1.0 + std::exp(std::log(double(T)) - s));
      }
    }
  }
  if (m.gap_fix == config::GapFix::perp) {
    for (double& x : M.values()) x -= 1.0 / double(T);
  } else if (m.gap_fix == config::GapFix::outliers) {  // remove the leading r triplets
    const auto svd = linalg::svd(M);
    std::size_t r = static_cast<std::size_t>(m.outliers_r);
    if (r == 0) {
      double best = -1.0;
      for (std::size_t i = 0; i + 1 < svd.s.size(); ++i)
        if (svd.s[i] - svd.s[i + 1] > best) best = svd.s[i] - svd.s[i + 1], r = i + 1;
    }
    for (std::size_t k = 0; k < r; ++k)
      for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j < T; ++j) M(i, j) -= svd.s[k] * svd.U(i, k) * svd.Vt(k, j);
  }
  return M;
}

// One layer recomputed naively from the weights of its tape, on the true-scale input X.
Matrix naive_layer(const ModelParams& m, const LayerTape& t, const Matrix& X) {
  const std::size_t T = X.rows(), d = X.cols();
  Matrix O(T, d, 0.0);
  for (const auto& h : t.heads) {
    const Matrix V = naive_matmul(X, h.W_V);
    if (m.mixer == Mixer::s4d) {
      for (std::size_t j = 0; j < T; ++j)
        for (std::size_t i = 0; i <= j; ++i)
          for (std::size_t c = 0; c < d; ++c) O(j, c) += m.skip_scale * t.s4d_K(j - i, c) * V(i, c);
      continue;
    }
    const Matrix M = m.input_dependent_mixer() ? naive_mixer(m, h, X) : h.M;
    const Matrix MV = naive_matmul(M, V);
    for (std::size_t i = 0; i < O.size(); ++i) O.data()[i] += m.skip_scale * MV.data()[i];
  }
  if (m.gate == config::Gate::silu) {
    const Matrix Z = naive_matmul(X, t.W_G);
    for (std::size_t i = 0; i < O.size(); ++i) {
      const double z = Z.data()[i] / std::sqrt(double(d));
      O.data()[i] *= z / (1.0 + std::exp(-z));
    }
  }
  Matrix Y(T, d);
  for (std::size_t i = 0; i < Y.size(); ++i) Y.data()[i] = m.lambda * X.data()[i] + O.data()[i];
  naive_norm(m.norm, Y);
  if (m.mlp == config::Mlp::relu) {
    Matrix H = naive_matmul(Y, t.W_1);
    for (double& x : H.values()) x = std::max(x * std::sqrt(2.0 / double(d)), 0.0);
    const Matrix F = naive_matmul(H, t.W_2);
    for (std::size_t i = 0; i < Y.size(); ++i)
      Y.data()[i] = m.lambda_mlp * Y.data()[i] + F.data()[i] / std::sqrt(double(t.W_2.rows()));
    naive_norm(m.norm, Y);
  }
  return Y;
}

Matrix naive_forward(const ModelParams& m, const TaskTape& tape) {
  Matrix X = tape.layers.front().X;
  for (const auto& t : tape.layers) X = naive_layer(m, t, X);
  return X;
}

double true_scale(long log2) { return std::ldexp(1.0, static_cast<int>(log2)); }

struct Case {
  std::string name;
  std::function<void(ModelParams&)> set;
};

ModelParams base_model(Mixer mixer) {
  auto m = test::small_model(mixer, 5, 4);
  m.input = config::InputKind::sphere;
  m.state_dim = 3;
  m.mlp_ratio = 2;
  return m;
}

std::vector<Case> cases() {
  using config::Norm;
  return {
      {"softmax_2heads_perp_layernorm",
       [](ModelParams& m) { m.heads = 2, m.gap_fix = config::GapFix::perp, m.lambda = 0.5, m.norm = Norm::layernorm; }},
      {"relu_rms", [](ModelParams& m) { m.mixer = Mixer::relu, m.sigma_qk = 1.5, m.norm = Norm::rms, m.lambda = 1; }},
      {"sigmoid_plain", [](ModelParams& m) { m.mixer = Mixer::sigmoid, m.lambda = 0.3, m.sigma_qk = 1.2; }},
      {"softmax_outliers", [](ModelParams& m) { m.gap_fix = config::GapFix::outliers, m.norm = Norm::rms; }},
      {"softmax_outliers_r2_orthogonal",
       [](ModelParams& m) {
         m.gap_fix = config::GapFix::outliers, m.outliers_r = 2, m.norm = Norm::rms;
         m.value_init = config::ValueInit::orthogonal, m.sigma_v = 0.8;
       }},
      {"ssd_gaussian_rms",
       [](ModelParams& m) { m.mixer = Mixer::ssd, m.alpha = 0.9, m.norm = Norm::rms, m.lambda = 1; }},
      {"ssd_identity_plain",
       [](ModelParams& m) {
         m.mixer = Mixer::ssd, m.bc_init = config::BcInit::identity, m.alpha = 0.8, m.state_dim = 4;
       }},
      {"s4d_layernorm", [](ModelParams& m) { m.mixer = Mixer::s4d, m.norm = Norm::layernorm, m.lambda = 1; }},
      {"markov_outliers_linear", [](ModelParams& m) { m.mixer = Mixer::markov, m.gap_fix = config::GapFix::outliers; }},
      {"lti_gate_rms",
       [](ModelParams& m) {
         m.mixer = Mixer::lti, m.alpha = 0.7, m.gate = config::Gate::silu, m.norm = Norm::rms, m.lambda = 2;
       }},
      {"identity_mlp_plain",
       [](ModelParams& m) { m.mixer = Mixer::identity, m.mlp = config::Mlp::relu, m.lambda = 1, m.lambda_mlp = 1; }},
      {"uniform_mlp_layernorm",
       [](ModelParams& m) {
         m.mixer = Mixer::uniform, m.mlp = config::Mlp::relu, m.norm = Norm::layernorm, m.lambda = 0.5,
         m.lambda_mlp = 0.7;
       }},
      {"softmax_gate_mlp_skip_scale",
       [](ModelParams& m) {
         m.gate = config::Gate::silu, m.mlp = config::Mlp::relu, m.norm = Norm::rms, m.lambda = -1.5, m.lambda_mlp = 1,
         m.skip_scale = 0.5;
       }},
      {"matrix_identity_values",
       [](ModelParams& m) {
         m.mixer = Mixer::matrix, m.value_init = config::ValueInit::identity, m.sigma_v = 0.9;
         auto A = std::make_shared<Matrix>(5, 5);
         for (std::size_t i = 0; i < 5; ++i)
           for (std::size_t j = 0; j < 5; ++j) (*A)(i, j) = std::sin(1.0 + 3.0 * double(i) + double(j));
         m.mixer_matrix = A;
       }},
  };
}

TaskTape tape_of(const ModelParams& m, std::uint64_t seed = 3) {
  RandomSource random(seed, 0, m.T, m.d);
  return models::record_task(m, random, models::make_input(m, random), m.depth);
}

// The tape holds everything the forward pass uses: the naive forward from its weights gives every
// layer's input (true scale) and the output.
TEST(Gradients, TapeReproducesTheForwardPass) {
  for (const auto& c : cases()) {
    auto m = base_model(Mixer::softmax);
    c.set(m);
    const TaskTape tape = tape_of(m);
    ASSERT_TRUE(tape.finite) << c.name;
    Matrix X = tape.layers.front().X;
    for (std::size_t l = 0; l < tape.layers.size(); ++l) {
      X = naive_layer(m, tape.layers[l], X);
      const bool last = l + 1 == tape.layers.size();
      const Matrix& got = last ? tape.X_out : tape.layers[l + 1].X;
      const double s = true_scale(last ? tape.X_out_log2 : tape.layers[l + 1].log2_scale);
      double err = 0.0, mx = 0.0;
      for (std::size_t i = 0; i < X.size(); ++i) {
        err = std::max(err, std::abs(got.data()[i] * s - X.data()[i]));
        mx = std::max(mx, std::abs(X.data()[i]));
      }
      // gap_fix outliers subtracts the leading singular triplets of M: rounding differences of
      // M (the naive softmax uses libm's exp, the layer its vectorised one, <= 1 ulp apart) come
      // back amplified by s_1 / (s_r - s_(r+1)), up to ~5x on these 5 x 5 mixers.
      const double tol = m.gap_fix == config::GapFix::outliers ? 1e-11 : 1e-12;
      EXPECT_LT(err, tol * mx) << c.name << " layer " << l + 1;
    }
  }
}

// d<v, X_L>/dW_{V,l} and d<v, X_L>/dX_0 of the reverse pass against central differences of the
// naive forward pass, for every entry of every value weight.
TEST(Gradients, ReversePassMatchesCentralDifferences) {
  for (const auto& c : cases()) {
    auto m = base_model(Mixer::softmax);
    c.set(m);
    const TaskTape tape = tape_of(m);
    Matrix v(static_cast<std::size_t>(m.T), static_cast<std::size_t>(m.d));
    rng::fill_normal({99, 0, 1, 1, 0, rng::Tensor::input, 0}, v.values());
    // reverse pass, chained by hand (no renormalisation of G at these sizes)
    std::vector<std::vector<Matrix>> grads(tape.layers.size());
    Matrix G = v;
    for (std::size_t l = tape.layers.size(); l-- > 0;) {
      G = models::layer_vjp(m, tape.layers[l], G, grads[l]);
      for (auto& g : grads[l])
        for (double& x : g.values()) x *= true_scale(tape.layers[l].log2_scale);
    }
    const double h = 1e-6;
    double worst = 0.0;
    for (std::size_t l = 0; l < tape.layers.size(); ++l)
      for (std::size_t k = 0; k < tape.layers[l].heads.size(); ++k)
        for (std::size_t e = 0; e < tape.layers[l].heads[k].W_V.size(); ++e) {
          TaskTape p = tape;
          double& w = p.layers[l].heads[k].W_V.data()[e];
          const double w0 = w;
          w = w0 + h;
          const double fp = frobenius_dot(v, naive_forward(m, p));
          w = w0 - h;
          const double fm = frobenius_dot(v, naive_forward(m, p));
          const double fd = (fp - fm) / (2 * h), an = grads[l][k].data()[e];
          worst = std::max(worst, std::abs(fd - an) / (1.0 + std::abs(fd)));
        }
    EXPECT_LT(worst, 2e-6) << c.name << " (W_V)";
    worst = 0.0;
    for (std::size_t e = 0; e < G.size(); ++e) {
      TaskTape p = tape;
      double& x = p.layers.front().X.data()[e];
      const double x0 = x;
      x = x0 + h;
      const double fp = frobenius_dot(v, naive_forward(m, p));
      x = x0 - h;
      const double fm = frobenius_dot(v, naive_forward(m, p));
      const double fd = (fp - fm) / (2 * h);
      worst = std::max(worst, std::abs(fd - G.data()[e]) / (1.0 + std::abs(fd)));
    }
    EXPECT_LT(worst, 2e-6) << c.name << " (X_0)";
  }
}

// ||J_l||_F^2 exactly, as the sum of ||J_l^T e||^2 over the T d unit cotangents e.
std::vector<double> jacobian_norms(const ModelParams& m, const TaskTape& tape, int L) {
  std::vector<double> g(static_cast<std::size_t>(L), 0.0);
  const std::size_t n = static_cast<std::size_t>(m.T) * static_cast<std::size_t>(m.d);
  for (std::size_t e = 0; e < n; ++e) {
    Matrix G(static_cast<std::size_t>(m.T), static_cast<std::size_t>(m.d), 0.0);
    G.data()[e] = 1.0;
    std::vector<Matrix> grad;
    for (int l = L; l >= 1; --l) {
      const auto& t = tape.layers[static_cast<std::size_t>(l - 1)];
      G = models::layer_vjp(m, t, G, grad);
      for (const auto& gw : grad)
        g[static_cast<std::size_t>(l - 1)] += frobenius_dot(gw, gw) * std::pow(true_scale(t.log2_scale), 2);
    }
  }
  return g;
}

// Mind the Gap, proof of Prop. 3.6: ||P_1 (x) P_2||_F^2 = ||P_1||^2 ||P_2||^2 equals the full
// Jacobian's Frobenius norm, for every output depth L and layer l.
TEST(Gradients, ExactRouteEqualsTheFullJacobian) {
  for (auto fix : {config::GapFix::none, config::GapFix::perp, config::GapFix::outliers}) {
    auto m = base_model(Mixer::markov);
    m.T = 6, m.d = 4, m.depth = 4, m.gap_fix = fix, m.skip_scale = 0.7;
    ASSERT_TRUE(models::exact_gradients_apply(m));
    const TaskTape tape = tape_of(m);
    const auto exact = models::exact_gradient_norms(m, tape, {1, 2, 3, 4});
    for (int L = 1; L <= 4; ++L) {
      const auto want = jacobian_norms(m, tape, L);
      for (int l = 1; l <= L; ++l) {
        EXPECT_NEAR(exact.log10_g[L - 1][l - 1], std::log10(want[l - 1]), 1e-12) << "L " << L << " l " << l;
        EXPECT_EQ(exact.stderr_log10[L - 1][l - 1], 0.0);
      }
    }
  }
}

TEST(Gradients, ExactRouteAppliesOnlyToLinearStacks) {
  auto m = base_model(Mixer::lti);
  EXPECT_TRUE(models::exact_gradients_apply(m));
  for (const auto& c : cases()) {
    auto n = base_model(Mixer::softmax);
    c.set(n);
    EXPECT_EQ(models::exact_gradients_apply(n),
              c.name == "markov_outliers_linear" || c.name == "matrix_identity_values")
        << c.name;
  }
}

// Hutchinson's estimate is unbiased for ||J||_F^2: with many probes it agrees with the exact
// value within a few of its own standard errors, on a linear stack (against the exact route) and
// on nonlinear ones (against the full Jacobian).
TEST(Gradients, HutchinsonAgreesWithExactWithinItsStandardError) {
  {
    auto m = base_model(Mixer::markov);
    m.T = 8, m.d = 6, m.depth = 5;
    const TaskTape tape = tape_of(m);
    RandomSource random(3, 0, m.T, m.d);
    const auto exact = models::exact_gradient_norms(m, tape, {5, 3});
    const auto hutch = models::hutchinson_gradient_norms(m, tape, {5, 3}, 400, random);
    for (std::size_t k = 0; k < 2; ++k)
      for (std::size_t l = 0; l < exact.log10_g[k].size(); ++l) {
        const double se = hutch.stderr_log10[k][l];
        EXPECT_GT(se, 0.0);
        EXPECT_LT(se, 0.05);
        EXPECT_LT(std::abs(hutch.log10_g[k][l] - exact.log10_g[k][l]), 4.5 * se) << "k " << k << " l " << l;
      }
  }
  for (const auto& c : cases()) {
    auto m = base_model(Mixer::softmax);
    c.set(m);
    const TaskTape tape = tape_of(m);
    RandomSource random(3, 0, m.T, m.d);
    const auto hutch = models::hutchinson_gradient_norms(m, tape, {m.depth}, 300, random);
    const auto want = jacobian_norms(m, tape, m.depth);
    for (std::size_t l = 0; l < want.size(); ++l)
      EXPECT_LT(std::abs(hutch.log10_g[0][l] - std::log10(want[l])), 4.5 * hutch.stderr_log10[0][l])
          << c.name << " l " << l + 1;
  }
}

// The engine's Hutchinson probes are keyed, so the estimate is a deterministic function of the
// task; and the exact route survives depths where the gradient norm overflows a double.
TEST(Gradients, DeterministicAndFiniteFarBeyondDoubleRange) {
  auto m = base_model(Mixer::markov);
  m.T = 64, m.d = 64, m.depth = 200, m.input = config::InputKind::orthonormal;
  const TaskTape tape = tape_of(m);
  const auto exact = models::exact_gradient_norms(m, tape, {200});
  RandomSource random(3, 0, m.T, m.d);
  const auto h1 = models::hutchinson_gradient_norms(m, tape, {200}, 4, random);
  const auto h2 = models::hutchinson_gradient_norms(m, tape, {200}, 4, random);
  EXPECT_EQ(h1.log10_g, h2.log10_g);
  // W_V ~ N(0, 1), d = 64: E||W_2..W_L||_F^2 = d^L = 10^361 at L = 200 (and ||A..A X_0|| ~ 1).
  EXPECT_NEAR(exact.log10_g[0][0], 200 * std::log10(64.0), 3.0);
  for (std::size_t l = 0; l < 200; ++l) {
    EXPECT_TRUE(std::isfinite(exact.log10_g[0][l]));
    EXPECT_LT(std::abs(h1.log10_g[0][l] - exact.log10_g[0][l]), 0.5) << l;  // 4 probes, sd ~ 1/sqrt(2 T d)
  }
}

// Mind the Gap Lemma A.2: for W_1 (T x d), W_2..W_q (d x d) with N(0, 1) entries and a unit u,
// E[s_1^2(u u^T W_1 ... W_q)] = d^q; s_1(u u^T B) = ||u^T B||.
TEST(Gradients, LemmaA2ExpectationOfGaussianProducts) {
  const std::size_t T = 12, d = 6;
  for (int q : {1, 2, 3}) {
    const int samples = 4000;
    double sum = 0.0, sum2 = 0.0;
    Matrix u(1, T);
    for (std::size_t i = 0; i < T; ++i) u(0, i) = (i % 2 ? 1.0 : -1.0) / std::sqrt(double(T));
    for (int s = 0; s < samples; ++s) {
      Matrix W1(T, d);
      rng::fill_normal({5, static_cast<std::uint32_t>(s), uint32_t(T), uint32_t(d), 1, rng::Tensor::value, 0},
                       W1.values());
      Matrix row = linalg::matmul(u, W1);
      for (int k = 2; k <= q; ++k) {
        Matrix W(d, d);
        rng::fill_normal(
            {5, static_cast<std::uint32_t>(s), uint32_t(T), uint32_t(d), uint32_t(k), rng::Tensor::value, 0},
            W.values());
        row = linalg::matmul(row, W);
      }
      const double s1sq = frobenius_dot(row, row);
      sum += s1sq;
      sum2 += s1sq * s1sq;
    }
    const double mean = sum / samples, se = std::sqrt((sum2 / samples - mean * mean) / samples);
    EXPECT_LT(std::abs(mean - std::pow(double(d), q)), 4 * se) << "q " << q;
    EXPECT_LT(se / mean, 0.05);
  }
}

// Mind the Gap Prop. 3.6 / Fig. 5 through the engine's exact route, with i.i.d. Markov attention
// and W_V ~ N(0, 1): g_{L,1} = ||A_L..A_1 X_0||^2 ||W_2..W_L||^2. The W product grows by d per layer;
// A keeps its rank-one part 11^T/T (norm 1) but A^perp = A - 11^T/T shrinks by sigma_A^2/T per layer
// (E||A^perp x||^2 = sigma_A^2 ||x||^2 / T). So per layer log10 g grows by log10 d without the fix
// and by log10(d/T) with perp: at T = d (the paper's gamma = 1) T^(L-1) growth against flat lines.
TEST(Gradients, MarkovGradientsExplodeWithDepthUnlessTheGapIsRemoved) {
  const int T = 100, d = 50, L = 6;
  for (auto fix : {config::GapFix::none, config::GapFix::perp}) {
    auto m = base_model(Mixer::markov);
    m.T = T, m.d = d, m.depth = L, m.gap_fix = fix, m.input = config::InputKind::gaussian;
    const TaskTape tape = tape_of(m);
    std::vector<int> depths(L);
    for (int k = 0; k < L; ++k) depths[k] = k + 1;
    const auto g = models::exact_gradient_norms(m, tape, depths);
    const double slope = (g.log10_g[L - 1][0] - g.log10_g[1][0]) / (L - 2);  // per layer, L = 2..6
    const double want = fix == config::GapFix::none ? std::log10(double(d)) : std::log10(double(d) / T);
    EXPECT_NEAR(slope, want, 0.1) << (fix == config::GapFix::none ? "no fix" : "perp");
  }
}

}  // namespace
}  // namespace rcsweep
