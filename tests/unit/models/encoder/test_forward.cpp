// models/encoder: the BERT-family encoder's forward pass (encoder.hpp) against naive long-double
// references written here: LayerNorm, the activations, the embedding and the post-LN block with
// its masks and ablations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "models/encoder/encoder.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::encoder {
namespace {

using Real = long double;
using Table = std::vector<std::vector<Real>>;

Matrix random_matrix(std::size_t rows, std::size_t cols, std::uint32_t stream, double scale = 1.0, double shift = 0.0) {
  Matrix M(rows, cols);
  rng::fill_normal({.seed = 20250107, .replicate = stream}, M.values());
  for (double& x : M.values()) x = shift + scale * x;
  return M;
}

std::vector<double> random_vector(std::size_t n, std::uint32_t stream, double scale, double shift = 0.0) {
  const Matrix M = random_matrix(1, n, stream, scale, shift);
  return {M.values().begin(), M.values().end()};
}

EncoderShape small_shape(int d, int heads, int intermediate, Activation activation = Activation::gelu) {
  EncoderShape s;
  s.vocab = 50;
  s.max_positions = 40;
  s.type_vocab = 2;
  s.d = d;
  s.heads = heads;
  s.intermediate = intermediate;
  s.layers = 2;
  s.embedding_size = d;
  s.activation = activation;
  return s;
}

// Weights of unit-order products (scale 1/sqrt(fan-in)), non-zero biases and affine LayerNorms.
BlockWeights random_block(const EncoderShape& s, std::uint32_t stream) {
  const auto d = static_cast<std::size_t>(s.d), m = static_cast<std::size_t>(s.intermediate);
  const double wd = 1.0 / std::sqrt(static_cast<double>(d)), wm = 1.0 / std::sqrt(static_cast<double>(m));
  BlockWeights w;
  w.W_Q = random_matrix(d, d, stream + 1, 2.0 * wd);  // sharp enough attention rows
  w.W_K = random_matrix(d, d, stream + 2, 2.0 * wd);
  w.W_V = random_matrix(d, d, stream + 3, wd);
  w.W_O = random_matrix(d, d, stream + 4, wd);
  w.b_Q = random_vector(d, stream + 5, 0.1);
  w.b_K = random_vector(d, stream + 6, 0.1);
  w.b_V = random_vector(d, stream + 7, 0.1);
  w.b_O = random_vector(d, stream + 8, 0.1);
  w.norm_attention = {random_vector(d, stream + 9, 0.2, 1.0), random_vector(d, stream + 10, 0.1)};
  w.W_1 = random_matrix(d, m, stream + 11, wd);
  w.b_1 = random_vector(m, stream + 12, 0.1);
  w.W_2 = random_matrix(m, d, stream + 13, wm);
  w.b_2 = random_vector(d, stream + 14, 0.1);
  w.norm_mlp = {random_vector(d, stream + 15, 0.2, 1.0), random_vector(d, stream + 16, 0.1)};
  return w;
}

// ---- naive references (long double, plain loops) ----------------------------------------------

Table to_table(const Matrix& M) {
  Table t(M.rows(), std::vector<Real>(M.cols()));
  for (std::size_t i = 0; i < M.rows(); ++i)
    for (std::size_t j = 0; j < M.cols(); ++j) t[i][j] = M(i, j);
  return t;
}

Table naive_linear(const Table& X, const Matrix& W, const std::vector<double>& b) {
  Table Y(X.size(), std::vector<Real>(W.cols()));
  for (std::size_t i = 0; i < X.size(); ++i)
    for (std::size_t c = 0; c < W.cols(); ++c) {
      Real s = b[c];
      for (std::size_t k = 0; k < W.rows(); ++k) s += X[i][k] * static_cast<Real>(W(k, c));
      Y[i][c] = s;
    }
  return Y;
}

void naive_layer_norm(const LayerNormWeights& w, Real eps, Table& X) {
  for (auto& row : X) {
    const auto d = static_cast<Real>(row.size());
    Real mean = 0, var = 0;
    for (Real x : row) mean += x;
    mean /= d;
    for (Real x : row) var += (x - mean) * (x - mean);
    var /= d;
    for (std::size_t j = 0; j < row.size(); ++j)
      row[j] = (row[j] - mean) / std::sqrt(var + eps) * w.gamma[j] + w.beta[j];
  }
}

Real naive_activation(Activation a, Real x) {
  switch (a) {
    case Activation::gelu: return x * 0.5L * std::erfc(-x / std::sqrt(2.0L));
    case Activation::gelu_tanh:
      return 0.5L * x * (1.0L + std::tanh(std::sqrt(2.0L / std::numbers::pi_v<Real>) * (x + 0.044715L * x * x * x)));
    case Activation::relu: return x > 0 ? x : 0;
  }
  return 0;
}

struct Naive {
  Table Y, A, branch, head0;
};

Naive naive_block(const EncoderShape& s, const BlockWeights& w, const Ablation& ab, const std::vector<bool>& real,
                  const Matrix& X0) {
  const std::size_t T = X0.rows(), d = X0.cols(), H = static_cast<std::size_t>(s.heads), dh = d / H;
  const Table X = to_table(X0);
  const Table Q = naive_linear(X, w.W_Q, w.b_Q), K = naive_linear(X, w.W_K, w.b_K), V = naive_linear(X, w.W_V, w.b_V);
  Naive out;
  Table context(T, std::vector<Real>(d, 0));
  out.head0.assign(T, std::vector<Real>(T, 0));
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < T; ++i) {
      std::vector<Real> score(T, 0);
      std::vector<bool> in(T);
      Real mx = -std::numeric_limits<Real>::infinity();
      for (std::size_t j = 0; j < T; ++j) {
        in[j] = (real.empty() || real[j]) && (!ab.causal || j <= i);
        for (std::size_t c = h * dh; c < (h + 1) * dh; ++c) score[j] += Q[i][c] * K[j][c];
        score[j] /= std::sqrt(static_cast<Real>(dh));
        if (in[j]) mx = std::max(mx, score[j]);
      }
      Real sum = 0;
      for (std::size_t j = 0; j < T; ++j) sum += in[j] ? std::exp(score[j] - mx) : 0;
      for (std::size_t j = 0; j < T; ++j) {
        const Real p = in[j] ? std::exp(score[j] - mx) / sum : 0;
        if (h == 0) out.head0[i][j] = p;
        for (std::size_t c = h * dh; c < (h + 1) * dh; ++c) context[i][c] += p * V[j][c];
      }
    }
  out.branch = naive_linear(context, w.W_O, w.b_O);
  out.A = out.branch;
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) out.A[i][j] = ab.lambda_attention * X[i][j] + out.branch[i][j];
  if (ab.norm) naive_layer_norm(w.norm_attention, s.layer_norm_eps, out.A);
  out.Y = out.A;
  if (!ab.mlp) return out;
  Table hidden = naive_linear(out.A, w.W_1, w.b_1);
  for (auto& row : hidden)
    for (Real& x : row) x = naive_activation(s.activation, x);
  const Table Z = naive_linear(hidden, w.W_2, w.b_2);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < d; ++j) out.Y[i][j] = ab.lambda_mlp * out.A[i][j] + Z[i][j];
  if (ab.norm) naive_layer_norm(w.norm_mlp, s.layer_norm_eps, out.Y);
  return out;
}

// max |got - want| / max |want|
double relative_error(const Matrix& got, const Table& want) {
  EXPECT_EQ(got.rows(), want.size());
  Real err = 0, scale = 0;
  for (std::size_t i = 0; i < got.rows() && i < want.size(); ++i) {
    EXPECT_EQ(got.cols(), want[i].size());
    for (std::size_t j = 0; j < got.cols() && j < want[i].size(); ++j) {
      err = std::max(err, std::fabs(static_cast<Real>(got(i, j)) - want[i][j]));
      scale = std::max(scale, std::fabs(want[i][j]));
    }
  }
  return static_cast<double>(err / scale);
}

bool same_row(const Matrix& a, const Matrix& b, std::size_t i) {
  return std::memcmp(a.row(i).data(), b.row(i).data(), a.cols() * sizeof(double)) == 0;
}

bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// ---- the shape's functions ---------------------------------------------------------------------

TEST(EncoderShape, BertAppliesOneGroupPerLayer) {
  EncoderShape s = small_shape(8, 2, 16);
  s.layers = 4;
  EXPECT_EQ(s.groups(), 4);
  for (int l = 1; l <= 4; ++l) EXPECT_EQ(s.group_of(l), l - 1);
  EXPECT_EQ(s.position_offset(), 0);
  EXPECT_EQ(s.d_head(), 4);
}

TEST(EncoderShape, AlbertSharesGroupsAcrossDepth) {
  EncoderShape s = small_shape(8, 2, 16);
  s.family = Family::albert;
  s.layers = 12;
  s.hidden_groups = 1;
  EXPECT_EQ(s.groups(), 1);
  for (int l = 1; l <= 12; ++l) EXPECT_EQ(s.group_of(l), 0) << l;
  s.hidden_groups = 2;
  EXPECT_EQ(s.groups(), 2);
  for (int l = 1; l <= 12; ++l) EXPECT_EQ(s.group_of(l), l <= 6 ? 0 : 1) << l;
  // Hugging Face's int(i / (3 / 2)) for i = 0, 1, 2
  s.layers = 3;
  EXPECT_EQ(s.group_of(1), 0);
  EXPECT_EQ(s.group_of(2), 0);
  EXPECT_EQ(s.group_of(3), 1);
  // the division in double, as Python's: int(9 / (18 / 14)) = 6 where (9 * 14) // 18 = 7
  s.layers = 18;
  s.hidden_groups = 14;
  EXPECT_EQ(s.group_of(10), 6);
  EXPECT_EQ(s.group_of(18), 13);
  EXPECT_EQ(s.position_offset(), 0);
}

TEST(EncoderShape, RobertaPositionsStartAfterThePadId) {
  EncoderShape s = small_shape(8, 2, 16);
  s.family = Family::roberta;
  s.pad_token_id = 1;
  EXPECT_EQ(s.position_offset(), 2);
  EXPECT_EQ(s.group_of(3), 2);
}

// ---- LayerNorm ---------------------------------------------------------------------------------

TEST(EncoderLayerNorm, ZeroMeanUnitVarianceThenAffine) {
  const std::size_t d = 13;
  const double eps = 1e-12;
  const Matrix X0 = random_matrix(7, d, 1, 3.0, 5.0);
  Matrix X = X0;
  layer_norm({std::vector<double>(d, 1.0), std::vector<double>(d, 0.0)}, eps, X);
  for (std::size_t i = 0; i < X.rows(); ++i) {
    Real mean = 0, var = 0, mean0 = 0, var0 = 0;
    for (std::size_t j = 0; j < d; ++j) mean += X(i, j), mean0 += X0(i, j);
    mean /= d, mean0 /= d;
    for (std::size_t j = 0; j < d; ++j) var += X(i, j) * X(i, j), var0 += (X0(i, j) - mean0) * (X0(i, j) - mean0);
    var /= d, var0 /= d;
    EXPECT_LT(std::fabs(mean), 1e-15) << i;
    EXPECT_NEAR(static_cast<double>(var), static_cast<double>(var0 / (var0 + eps)), 1e-14) << i;  // closed form
  }
  // gamma and beta: y = z gamma + beta, against the naive loop
  const LayerNormWeights w{random_vector(d, 2, 0.5, 1.0), random_vector(d, 3, 0.5)};
  Matrix Y = X0;
  layer_norm(w, eps, Y);
  Table want = to_table(X0);
  naive_layer_norm(w, eps, want);
  EXPECT_LT(relative_error(Y, want), 1e-14);
  for (std::size_t i = 0; i < Y.rows(); ++i)
    for (std::size_t j = 0; j < d; ++j)
      EXPECT_NEAR((Y(i, j) - w.beta[j]) / w.gamma[j], X(i, j), 1e-13) << i << " " << j;
}

TEST(EncoderLayerNorm, RefusesWeightsOfAnotherWidth) {
  Matrix X = random_matrix(3, 5, 4);
  EXPECT_THROW(layer_norm({std::vector<double>(4, 1.0), std::vector<double>(5, 0.0)}, 1e-12, X), Error);
  EXPECT_THROW(layer_norm({std::vector<double>(5, 1.0), std::vector<double>(6, 0.0)}, 1e-12, X), Error);
}

// ---- activations -------------------------------------------------------------------------------

double act(Activation a, double x) {
  std::vector<double> v{x};
  activate(a, v);
  return v[0];
}

TEST(EncoderActivation, ExactGeluAtKnownValues) {  // x Phi(x), from 40-digit arithmetic
  const std::pair<double, double> known[] = {{1.0, 0.8413447460685429},  {-1.0, -0.15865525393145705},
                                             {2.0, 1.9544997361036416},  {-3.0, -0.0040496940948902835},
                                             {0.5, 0.34573123063700656}, {-10.0, -7.619853024160526e-23}};
  for (const auto& [x, y] : known) EXPECT_NEAR(act(Activation::gelu, x), y, 4e-16 * std::fabs(y)) << x;
  EXPECT_EQ(act(Activation::gelu, 0.0), 0.0);
  EXPECT_EQ(act(Activation::gelu, 1e300), 1e300);
  EXPECT_EQ(act(Activation::gelu, -1e300), 0.0);
  EXPECT_EQ(act(Activation::gelu, std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(act(Activation::gelu, std::numeric_limits<double>::quiet_NaN())));
}

// The vectorisable erfc of the exact GELU against the long-double erfc over its whole range, to a
// few ulp relative (also where x Phi(x) is tiny: x < 0).
TEST(EncoderActivation, ExactGeluAgainstLongDoubleErfc) {
  std::vector<double> x;
  for (int i = -39000; i <= 39000; ++i) x.push_back(i * 1e-3);
  const Matrix extra = random_matrix(1, 5000, 5, 8.0);
  x.insert(x.end(), extra.values().begin(), extra.values().end());
  for (double t : {1e-300, 1e-20, 1e-8, 0.25, 0.84375, 1.25, 2.857, 6.0, 27.0})
    for (double s : {1.0, -1.0}) x.push_back(s * t);
  std::vector<double> y = x;
  activate(Activation::gelu, y);
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Real want = naive_activation(Activation::gelu, x[i]);
    if (std::fabs(want) < 1e-290L) {  // beyond double's normal range: 0 or a denormal
      EXPECT_LE(std::fabs(y[i]), 1e-290) << x[i];
      continue;
    }
    worst = std::max(worst, static_cast<double>(std::fabs((y[i] - want) / want)));
  }
  EXPECT_LT(worst, 2e-15);
}

TEST(EncoderActivation, TanhGeluAtKnownValuesAndAgainstItsFormula) {
  const std::pair<double, double> known[] = {
      {1.0, 0.8411919906082767}, {-1.0, -0.1588080093917233}, {2.0, 1.954597694087775}, {-3.0, -0.003637392081773019}};
  for (const auto& [x, y] : known) EXPECT_NEAR(act(Activation::gelu_tanh, x), y, 1e-15 * std::fabs(y)) << x;
  double worst = 0.0;
  for (int i = -3000; i <= 3000; ++i) {  // 0.5 x (1 + tanh v) in long double: no cancellation here
    const double x = i * 1e-3;
    if (x == 0.0) continue;
    const Real want = naive_activation(Activation::gelu_tanh, x);
    worst = std::max(worst, static_cast<double>(std::fabs((act(Activation::gelu_tanh, x) - want) / want)));
  }
  EXPECT_LT(worst, 2e-15);
  EXPECT_EQ(act(Activation::gelu_tanh, 0.0), 0.0);
  EXPECT_EQ(act(Activation::gelu_tanh, -50.0), -0.0);
  EXPECT_EQ(act(Activation::gelu_tanh, 50.0), 50.0);
}

TEST(EncoderActivation, Relu) {
  EXPECT_EQ(act(Activation::relu, 2.5), 2.5);
  EXPECT_EQ(act(Activation::relu, -2.5), 0.0);
  EXPECT_EQ(act(Activation::relu, 0.0), 0.0);
  EXPECT_TRUE(std::isnan(act(Activation::relu, std::numeric_limits<double>::quiet_NaN())));
}

// The vectorised loop gives the bits of the element-by-element call (same IEEE operations).
TEST(EncoderActivation, VectorisedLoopGivesTheScalarBits) {
  const Matrix values = random_matrix(1, 100003, 6, 4.0);
  for (Activation a : {Activation::gelu, Activation::gelu_tanh, Activation::relu}) {
    std::vector<double> v(values.values().begin(), values.values().end());
    activate(a, v);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double one = act(a, values.data()[i]);
      differ += std::memcmp(&one, &v[i], sizeof one) != 0;
    }
    EXPECT_EQ(differ, 0u) << static_cast<int>(a);
  }
}

// ---- the block ---------------------------------------------------------------------------------

struct BlockRun {
  Matrix Y;
  BlockOutputs outputs;
};

BlockRun run_block(const EncoderShape& s, const BlockWeights& w, const Ablation& ab, const std::vector<bool>& real,
                   const Matrix& X0) {
  BlockRun r{X0, {}};
  r.outputs.keep_head0 = true;
  apply_block(s, w, ab, real, r.Y, &r.outputs);
  return r;
}

void expect_matches_naive(const EncoderShape& s, const BlockWeights& w, const Ablation& ab,
                          const std::vector<bool>& real, const Matrix& X0, const char* what) {
  const BlockRun got = run_block(s, w, ab, real, X0);
  const Naive want = naive_block(s, w, ab, real, X0);
  EXPECT_LT(relative_error(got.Y, want.Y), 1e-12) << what;
  EXPECT_LT(relative_error(got.outputs.after_attention, want.A), 1e-12) << what;
  EXPECT_LT(relative_error(got.outputs.attention, want.branch), 1e-12) << what;
  EXPECT_LT(relative_error(got.outputs.head0, want.head0), 1e-12) << what;
}

TEST(EncoderBlock, MatchesTheNaiveBlockForOneAndSeveralHeads) {
  for (int heads : {1, 2, 4})
    for (Activation a : {Activation::gelu, Activation::gelu_tanh, Activation::relu}) {
      const EncoderShape s = small_shape(8, heads, 12, a);
      const BlockWeights w = random_block(s, 100);
      const Matrix X0 = random_matrix(6, 8, 7);
      const std::string what = std::to_string(heads) + " heads, activation " + std::to_string(static_cast<int>(a));
      expect_matches_naive(s, w, {}, {}, X0, what.c_str());
    }
}

TEST(EncoderBlock, PaddedKeysGetZeroProbabilityAndDoNotReachRealRows) {
  const EncoderShape s = small_shape(8, 2, 12);
  const BlockWeights w = random_block(s, 200);
  const Matrix X0 = random_matrix(6, 8, 8);
  const std::vector<bool> real{true, true, false, true, false, false};
  expect_matches_naive(s, w, {}, real, X0, "padding");
  const BlockRun got = run_block(s, w, {}, real, X0);
  for (std::size_t i = 0; i < 6; ++i) {
    Real sum = 0;
    for (std::size_t j = 0; j < 6; ++j) {
      if (real[j]) {
        EXPECT_GT(got.outputs.head0(i, j), 0.0) << i << " " << j;
      } else {
        EXPECT_EQ(got.outputs.head0(i, j), 0.0) << i << " " << j;  // exactly
      }
      sum += got.outputs.head0(i, j);
    }
    EXPECT_NEAR(static_cast<double>(sum), 1.0, 1e-15) << i;
  }
  // other padded rows of X: the real rows' outputs keep their bits
  Matrix X1 = X0;
  const Matrix noise = random_matrix(6, 8, 9, 10.0);
  for (std::size_t i = 0; i < 6; ++i)
    if (!real[i])
      for (std::size_t j = 0; j < 8; ++j) X1(i, j) += noise(i, j);
  const BlockRun other = run_block(s, w, {}, real, X1);
  for (std::size_t i = 0; i < 6; ++i) {
    if (!real[i]) {
      EXPECT_FALSE(same_row(got.Y, other.Y, i)) << i;  // the change did reach the padded rows
      continue;
    }
    EXPECT_TRUE(same_row(got.Y, other.Y, i)) << i;
    EXPECT_TRUE(same_row(got.outputs.head0, other.outputs.head0, i)) << i;
  }
}

TEST(EncoderBlock, CausalAttentionSeesNoLaterToken) {
  const EncoderShape s = small_shape(8, 4, 12);
  const BlockWeights w = random_block(s, 300);
  const Matrix X0 = random_matrix(7, 8, 10);
  Ablation causal;
  causal.causal = true;
  expect_matches_naive(s, w, causal, {}, X0, "causal");
  expect_matches_naive(s, w, causal, {true, true, false, true, true, false, true}, X0, "causal with padding");
  const BlockRun got = run_block(s, w, causal, {}, X0);
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t j = i + 1; j < 7; ++j) EXPECT_EQ(got.outputs.head0(i, j), 0.0) << i << " " << j;
  Matrix X1 = X0;  // a change of the last token reaches no earlier row
  for (std::size_t j = 0; j < 8; ++j) X1(6, j) += 1.0;
  const BlockRun other = run_block(s, w, causal, {}, X1);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_TRUE(same_row(got.Y, other.Y, i)) << i;
  EXPECT_FALSE(same_row(got.Y, other.Y, 6));
}

TEST(EncoderBlock, ARowWithEveryKeyMaskedIsAnError) {
  const EncoderShape s = small_shape(8, 2, 12);
  const BlockWeights w = random_block(s, 400);
  Matrix X = random_matrix(4, 8, 11);
  EXPECT_THROW(apply_block(s, w, {}, std::vector<bool>(4, false), X), Error);
  Ablation causal;
  causal.causal = true;  // query 0 sees only key 0, which is padding
  X = random_matrix(4, 8, 11);
  EXPECT_THROW(apply_block(s, w, causal, {false, true, true, true}, X), Error);
  X = random_matrix(4, 8, 11);
  EXPECT_NO_THROW(apply_block(s, w, {}, {false, true, true, true}, X));
}

TEST(EncoderBlock, Ablations) {
  const EncoderShape s = small_shape(8, 2, 12);
  const BlockWeights w = random_block(s, 500);
  const Matrix X0 = random_matrix(5, 8, 12);
  Ablation no_skip;
  no_skip.lambda_attention = 0.0;
  no_skip.lambda_mlp = 0.0;
  expect_matches_naive(s, w, no_skip, {}, X0, "lambda 0");
  Ablation half;
  half.lambda_attention = 0.5;
  half.lambda_mlp = 1.5;
  expect_matches_naive(s, w, half, {}, X0, "lambda 0.5, 1.5");
  Ablation no_mlp;
  no_mlp.mlp = false;
  expect_matches_naive(s, w, no_mlp, {}, X0, "no MLP");
  Ablation no_norm;
  no_norm.norm = false;
  expect_matches_naive(s, w, no_norm, {}, X0, "no norm");

  // !mlp: Y = A
  BlockRun r = run_block(s, w, no_mlp, {}, X0);
  EXPECT_TRUE(bitwise_equal(r.Y, r.outputs.after_attention));
  // lambda 0, no norm, no MLP: Y is the attention branch alone
  Ablation branch_only;
  branch_only.lambda_attention = 0.0;
  branch_only.norm = false;
  branch_only.mlp = false;
  r = run_block(s, w, branch_only, {}, X0);
  EXPECT_EQ(r.Y, r.outputs.attention);
  // lambda 1, no norm, no MLP: Y = X + branch exactly
  Ablation plain = branch_only;
  plain.lambda_attention = 1.0;
  r = run_block(s, w, plain, {}, X0);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 8; ++j) EXPECT_EQ(r.Y(i, j), X0(i, j) + r.outputs.attention(i, j));
}

// The block's output on 1, 2 and 3 threads, bitwise the same.
void expect_same_bits_on_1_2_3_threads(const EncoderShape& s, const BlockWeights& w, const std::vector<bool>& real,
                                       const Matrix& X0) {
  std::vector<Matrix> results;
  for (int threads : {1, 2, 3}) {
    parallel::set_threads(threads);
    results.push_back(run_block(s, w, {}, real, X0).Y);
  }
  parallel::set_threads(1);
  EXPECT_TRUE(bitwise_equal(results[0], results[1]));
  EXPECT_TRUE(bitwise_equal(results[0], results[2]));
}

TEST(EncoderBlock, ThreadCountChangesNoBit) {
  const EncoderShape s = small_shape(32, 4, 64);
  const BlockWeights w = random_block(s, 600);
  const Matrix X0 = random_matrix(300, 32, 13);
  std::vector<bool> real(300, true);
  for (std::size_t i = 250; i < 300; ++i) real[i] = false;
  expect_same_bits_on_1_2_3_threads(s, w, real, X0);
}

// At H T^2 above 2^22 scores entries the heads run one after another (each product and softmax
// on the threads), below it side by side (the test above): both match the naive block and give the
// same bits on 1, 2 and 3 threads.
TEST(EncoderBlock, HeadsOneAfterAnotherMatchNaiveAndThreadCountChangesNoBit) {
  const EncoderShape s = small_shape(16, 4, 24);
  const BlockWeights w = random_block(s, 700);
  const Matrix X0 = random_matrix(1040, 16, 14);  // 4 x 1040^2 > 2^22
  std::vector<bool> real(1040, true);
  for (std::size_t i = 1000; i < 1040; ++i) real[i] = false;
  expect_matches_naive(s, w, {}, real, X0, "heads one after another");
  expect_same_bits_on_1_2_3_threads(s, w, real, X0);
}

TEST(EncoderBlock, RefusesWrongShapes) {
  const EncoderShape s = small_shape(8, 2, 12);
  const BlockWeights w = random_block(s, 700);
  Matrix X = random_matrix(4, 6, 14);
  EXPECT_THROW(apply_block(s, w, {}, {}, X), Error);  // 6 columns, d = 8
  X = random_matrix(4, 8, 14);
  EXPECT_THROW(apply_block(s, w, {}, {true, true}, X), Error);
  BlockWeights bad = w;
  bad.W_1 = Matrix(8, 11);
  EXPECT_THROW(apply_block(s, bad, {}, {}, X), Error);
  Ablation no_mlp;
  no_mlp.mlp = false;
  EXPECT_NO_THROW(apply_block(s, bad, no_mlp, {}, X));  // the MLP's weights are not used
  EncoderShape odd = s;
  odd.heads = 3;
  EXPECT_THROW(apply_block(odd, w, {}, {}, X), Error);
}

// ---- the embedding -----------------------------------------------------------------------------

EmbeddingWeights random_embeddings(const EncoderShape& s, const EmbeddingRequest& request, std::uint32_t stream) {
  const auto E = static_cast<std::size_t>(s.embedding_size), d = static_cast<std::size_t>(s.d);
  EmbeddingWeights w;
  w.word = random_matrix(request.ids.size(), E, stream + 1);
  w.position = random_matrix(static_cast<std::size_t>(request.max_position) + 1, E, stream + 2);
  w.token_type = random_matrix(static_cast<std::size_t>(s.type_vocab), E, stream + 3);
  w.norm = {random_vector(E, stream + 4, 0.2, 1.0), random_vector(E, stream + 5, 0.1)};
  if (s.family == Family::albert) {
    w.projection = random_matrix(E, d, stream + 6, 0.5);
    w.projection_bias = random_vector(d, stream + 7, 0.1);
  }
  return w;
}

// LayerNorm(word[id] + type[t] + position[p]) of each token, then ALBERT's projection.
Table naive_embed(const EncoderShape& s, const EmbeddingWeights& w, const EmbeddingRequest& request, const Excerpt& ex,
                  const std::vector<int>& positions) {
  const auto E = static_cast<std::size_t>(s.embedding_size);
  Table X(ex.ids.size(), std::vector<Real>(E));
  for (std::size_t i = 0; i < ex.ids.size(); ++i) {
    std::size_t row = 0;
    while (request.ids[row] != ex.ids[i]) ++row;
    const auto type = static_cast<std::size_t>(ex.types.empty() ? 0 : ex.types[i]);
    for (std::size_t j = 0; j < E; ++j)
      X[i][j] = static_cast<Real>(w.word(row, j)) + w.token_type(type, j) +
                w.position(static_cast<std::size_t>(positions[i]), j);
  }
  naive_layer_norm(w.norm, s.layer_norm_eps, X);
  return s.family == Family::albert ? naive_linear(X, w.projection, w.projection_bias) : X;
}

TEST(EncoderEmbed, BertIsTheLayerNormOfTheSum) {
  const EncoderShape s = small_shape(6, 2, 12);
  const EmbeddingRequest request{{1, 4, 7}, 9};
  const EmbeddingWeights w = random_embeddings(s, request, 20);
  const Excerpt ex{{7, 1, 4, 4, 1}, {0, 1, 1, 0, 0}, {}};
  const Matrix X = embed(s, w, request, ex);
  EXPECT_LT(relative_error(X, naive_embed(s, w, request, ex, {0, 1, 2, 3, 4})), 1e-14);
  // BERT's positions ignore padding
  const Excerpt padded{{7, 1, 4, 4, 1}, {0, 1, 1, 0, 0}, {true, false, true, false, false}};
  EXPECT_TRUE(bitwise_equal(embed(s, w, request, padded), X));
}

TEST(EncoderEmbed, RobertaPositionsCountTheRealTokens) {
  EncoderShape s = small_shape(6, 2, 12);
  s.family = Family::roberta;
  s.pad_token_id = 1;
  const EmbeddingRequest request{{1, 5, 6, 7}, 8};
  const EmbeddingWeights w = random_embeddings(s, request, 30);
  const Excerpt right{{5, 6, 7, 1, 1}, {}, {true, true, true, false, false}};  // padding at the end
  EXPECT_LT(relative_error(embed(s, w, request, right), naive_embed(s, w, request, right, {2, 3, 4, 1, 1})), 1e-14);
  const Excerpt middle{{5, 1, 6, 7}, {}, {true, false, true, true}};
  EXPECT_LT(relative_error(embed(s, w, request, middle), naive_embed(s, w, request, middle, {2, 1, 3, 4})), 1e-14);
  const Excerpt all{{5, 6, 7}, {}, {}};
  EXPECT_LT(relative_error(embed(s, w, request, all), naive_embed(s, w, request, all, {2, 3, 4})), 1e-14);
}

TEST(EncoderEmbed, AlbertProjectsTheNormalisedEmbedding) {
  EncoderShape s = small_shape(6, 2, 12);
  s.family = Family::albert;
  s.embedding_size = 4;
  const EmbeddingRequest request{{0, 3, 10}, 5};
  const EmbeddingWeights w = random_embeddings(s, request, 40);
  const Excerpt ex{{3, 10, 0, 3}, {1, 0, 0, 1}, {}};
  const Matrix X = embed(s, w, request, ex);
  EXPECT_EQ(X.cols(), 6u);
  EXPECT_LT(relative_error(X, naive_embed(s, w, request, ex, {0, 1, 2, 3})), 1e-14);
}

TEST(EncoderEmbed, RefusesWhatItCannotLookUp) {
  EncoderShape s = small_shape(6, 2, 12);
  s.max_positions = 4;
  const EmbeddingRequest request{{1, 4, 7}, 3};
  const EmbeddingWeights w = random_embeddings(s, request, 50);
  EXPECT_NO_THROW(embed(s, w, request, {{1, 4, 7, 1}, {}, {}}));
  EXPECT_THROW(embed(s, w, request, {{1, 4, 50}, {}, {}}), Error);       // outside the vocabulary
  EXPECT_THROW(embed(s, w, request, {{1, -1}, {}, {}}), Error);          // negative id
  EXPECT_THROW(embed(s, w, request, {{1, 5}, {}, {}}), Error);           // not requested
  EXPECT_THROW(embed(s, w, request, {{1, 4, 7, 1, 4}, {}, {}}), Error);  // position 4 >= max_positions
  EXPECT_THROW(embed(s, w, request, {{1, 4}, {0, 2}, {}}), Error);       // token type 2
  EXPECT_THROW(embed(s, w, request, {{1, 4}, {0}, {}}), Error);          // types for 1 of 2 tokens
  EXPECT_THROW(embed(s, w, request, {{1, 4}, {}, {true}}), Error);       // flags for 1 of 2 tokens
  const EmbeddingRequest fewer{{1, 4, 7}, 1};
  const EmbeddingWeights short_positions = random_embeddings(s, fewer, 50);
  EXPECT_THROW(embed(s, short_positions, fewer, {{1, 4, 7}, {}, {}}), Error);  // beyond the request's positions
  try {
    embed(s, w, request, {{1, 4, 50}, {}, {}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size = 50"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rcsweep::models::encoder
