// models/mamba2: RandomWeights, MambaLMHeadModel's published initialisation of the Mamba-2 block from
// keyed Philox streams (mamba2.hpp, random_weights.cpp): the streams' layout, the distributions
// (bounds, moments within 5 standard errors), reproducibility and independence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "models/mamba2/mamba2.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::mamba2 {
namespace {

constexpr std::uint64_t seed = 20250611;

// 4 heads of 16 channels, 2 groups of B and C, biases on.
Mamba2Shape small_shape() {
  Mamba2Shape s;
  s.d_model = 32;
  s.layers = 3;
  s.vocab = 50;
  s.vocab_rows = 64;
  s.d_state = 8;
  s.d_conv = 4;
  s.expand = 2;
  s.headdim = 16;
  s.ngroups = 2;
  s.bias = true;
  return s;
}

// Wide enough for moments: E = 512, 128 heads.
Mamba2Shape wide_shape() {
  Mamba2Shape s = small_shape();
  s.d_model = 256;
  s.vocab = 1000;
  s.vocab_rows = 1008;
  s.headdim = 4;
  s.d_state = 16;
  s.layers = 5;
  return s;
}

bool bitwise_equal(std::span<const double> a, std::span<const double> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && bitwise_equal(a.values(), b.values());
}

// Entries equal in both (two independent draws share none).
std::size_t shared_entries(std::span<const double> a, std::span<const double> b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] == b[i];
  return n;
}

// The drawn (not constant) tensors of a layer.
std::vector<std::span<const double>> drawn(const LayerWeights& w) {
  return {w.W_in.values(), w.conv.values(), w.conv_bias, w.dt_bias, w.A_log, w.W_out.values()};
}

double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
  std::size_t n = 0;
};
Moments moments(std::span<const double> v) {
  Moments m;
  m.n = v.size();
  long double sum = 0, squares = 0;
  for (double x : v) sum += x, squares += static_cast<long double>(x) * x;
  m.mean = static_cast<double>(sum / m.n);
  m.var = static_cast<double>(squares / m.n) - m.mean * m.mean;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

// U(-b, b): every entry inside, the largest near b, mean 0 and variance b^2 / 3 within 5 standard
// errors (Var(x^2) = 4 b^4 / 45).
void expect_uniform(std::span<const double> v, double b, const char* what) {
  const Moments m = moments(v);
  const double n = static_cast<double>(m.n);
  EXPECT_GT(m.min, -b) << what;
  EXPECT_LT(m.max, b) << what;
  EXPECT_GT(std::max(-m.min, m.max), (1 - 20 / n) * b) << what;
  EXPECT_LT(std::fabs(m.mean), 5 * b / std::sqrt(3 * n)) << what;
  EXPECT_LT(std::fabs(m.var - b * b / 3), 5 * b * b * std::sqrt(4.0 / 45 / n)) << what;
}

TEST(Mamba2RandomWeights, ShapesFollowTheShape) {
  Mamba2Shape s = small_shape();
  const LayerWeights w = RandomWeights(s, seed, 0).layer(0);
  EXPECT_EQ(w.norm, std::vector<double>(32, 1.0));
  EXPECT_EQ(w.W_in.rows(), 32u);
  EXPECT_EQ(w.W_in.cols(), static_cast<std::size_t>(2 * 64 + 2 * 2 * 8 + 4));  // z | x | B | C | dt
  EXPECT_EQ(w.b_in, std::vector<double>(w.W_in.cols(), 0.0));
  EXPECT_EQ(w.conv.rows(), 4u);
  EXPECT_EQ(w.conv.cols(), static_cast<std::size_t>(64 + 2 * 2 * 8));
  EXPECT_EQ(w.conv_bias.size(), w.conv.cols());
  EXPECT_EQ(w.dt_bias.size(), 4u);
  EXPECT_EQ(w.A_log.size(), 4u);
  EXPECT_EQ(w.D, std::vector<double>(4, 1.0));
  EXPECT_EQ(w.gated_norm, std::vector<double>(64, 1.0));
  EXPECT_EQ(w.W_out.rows(), 64u);
  EXPECT_EQ(w.W_out.cols(), 32u);
  EXPECT_EQ(w.b_out, std::vector<double>(32, 0.0));
  EXPECT_EQ(RandomWeights(s, seed, 0).final_norm(), std::vector<double>(32, 1.0));
  EXPECT_EQ(RandomWeights(s, seed, 0).embedding(std::vector<std::int64_t>{1, 2, 63}).rows(), 3u);

  s.bias = false;
  s.conv_bias = false;
  s.rmsnorm = false;
  s.D_has_hdim = true;
  const LayerWeights v = RandomWeights(s, seed, 0).layer(0);
  EXPECT_TRUE(v.b_in.empty());
  EXPECT_TRUE(v.b_out.empty());
  EXPECT_TRUE(v.conv_bias.empty());
  EXPECT_TRUE(v.gated_norm.empty());
  EXPECT_EQ(v.D, std::vector<double>(64, 1.0));  // per channel
  EXPECT_TRUE(bitwise_equal(v.W_in, w.W_in));    // the switches change no drawn tensor
  EXPECT_TRUE(bitwise_equal(v.conv, w.conv));
}

// The documented layout: entry (i, j) of a rows x cols tensor is element i cols + j of its stream
// {seed, draw, T = 0, d_model, layer, tag, head 0}; the embedding 0.02 times a normal stream, the
// others uniform streams u mapped to b (2u - 1), dt and A as documented.
TEST(Mamba2RandomWeights, StreamsAreLaidOutRowMajorOnTheStoredLayout) {
  const Mamba2Shape s = small_shape();
  const std::uint32_t draw = 5;
  const RandomWeights w(s, seed, draw);
  const auto key = [&](std::uint32_t layer, rng::Tensor tensor) {
    return rng::StreamKey{
        .seed = seed, .replicate = draw, .T = 0, .d = 32, .layer = layer, .tensor = tensor, .head = 0};
  };
  const auto uniform = [&](const rng::StreamKey& k, std::size_t n) {
    std::vector<double> v(n);
    rng::fill_uniform(k, v);
    return v;
  };
  const auto scaled = [&](const rng::StreamKey& k, std::size_t n, double b) {
    std::vector<double> v = uniform(k, n);
    for (double& x : v) x = b * (2 * x - 1);
    return v;
  };
  const std::vector<std::int64_t> ids{42, 7};
  const Matrix e = w.embedding(ids);
  std::vector<double> row(32);
  rng::fill_normal(key(0, rng::Tensor::mamba2_embedding), 42 * 32, row);
  for (double& x : row) x *= 0.02;
  EXPECT_TRUE(bitwise_equal(e.row(0), row));

  const LayerWeights l = w.layer(2);
  const std::size_t P = static_cast<std::size_t>(s.d_in_proj()), C = static_cast<std::size_t>(s.conv_dim());
  EXPECT_TRUE(bitwise_equal(l.W_in.values(), scaled(key(2, rng::Tensor::mamba2_in_proj), 32 * P, 1 / std::sqrt(32.0))));
  EXPECT_TRUE(bitwise_equal(l.conv.values(), scaled(key(2, rng::Tensor::mamba2_conv), 4 * C, 0.5)));
  EXPECT_TRUE(bitwise_equal(l.conv_bias, scaled(key(2, rng::Tensor::mamba2_conv_bias), C, 0.5)));
  EXPECT_TRUE(bitwise_equal(
      l.W_out.values(), scaled(key(2, rng::Tensor::mamba2_out_proj), 64 * 32, 1 / std::sqrt(64.0) / std::sqrt(3.0))));
  const std::vector<double> u_dt = uniform(key(2, rng::Tensor::mamba2_dt), 4);
  const std::vector<double> u_A = uniform(key(2, rng::Tensor::mamba2_A), 4);
  for (std::size_t h = 0; h < 4; ++h) {
    const double dt = std::exp(std::log(0.001) + u_dt[h] * (std::log(0.1) - std::log(0.001)));
    EXPECT_NEAR(softplus(l.dt_bias[h]), dt, 1e-14 * dt) << h;
    EXPECT_NEAR(std::exp(l.A_log[h]), 1 + 15 * u_A[h], 1e-14) << h;
  }
}

TEST(Mamba2RandomWeights, BitwiseReproducible) {
  const Mamba2Shape s = small_shape();
  const RandomWeights a(s, seed, 3), b(s, seed, 3);
  const LayerWeights wa = a.layer(1), wb = b.layer(1);
  const auto da = drawn(wa), db = drawn(wb);
  for (std::size_t k = 0; k < da.size(); ++k) EXPECT_TRUE(bitwise_equal(da[k], db[k])) << k;
  const std::vector<std::int64_t> ids{5, 0, 63, 5};
  EXPECT_TRUE(bitwise_equal(a.embedding(ids), b.embedding(ids)));
}

TEST(Mamba2RandomWeights, SeedsDrawsLayersAndTensorsDiffer) {
  const Mamba2Shape s = small_shape();
  const RandomWeights draw0(s, seed, 0), draw1(s, seed, 1), other_seed(s, seed + 1, 0);
  const LayerWeights l0 = draw0.layer(0), l1 = draw0.layer(1), d1 = draw1.layer(0), s1 = other_seed.layer(0);
  const auto a = drawn(l0), b = drawn(l1), c = drawn(d1), e = drawn(s1);
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(shared_entries(a[k], b[k]), 0u) << "layers, tensor " << k;
    EXPECT_EQ(shared_entries(a[k], c[k]), 0u) << "draws, tensor " << k;
    EXPECT_EQ(shared_entries(a[k], e[k]), 0u) << "seeds, tensor " << k;
  }
  // the tensors of a layer are streams of their own: the conv weight and its bias share the bound
  EXPECT_EQ(shared_entries(l0.conv.values(), l0.conv_bias), 0u);
  const std::vector<std::int64_t> ids{3, 9};
  EXPECT_EQ(shared_entries(draw0.embedding(ids).values(), draw1.embedding(ids).values()), 0u);
  EXPECT_EQ(shared_entries(draw0.embedding(ids).values(), other_seed.embedding(ids).values()), 0u);
}

TEST(Mamba2RandomWeights, ARowAloneIsTheRowInAFullDraw) {
  const Mamba2Shape s = small_shape();
  const RandomWeights w(s, seed, 2);
  std::vector<std::int64_t> all(static_cast<std::size_t>(s.vocab_rows));
  std::iota(all.begin(), all.end(), 0);
  const Matrix full = w.embedding(all);
  for (const std::int64_t id : {0, 37, 63}) {
    const std::vector<std::int64_t> one{id};
    EXPECT_TRUE(bitwise_equal(w.embedding(one).row(0), full.row(static_cast<std::size_t>(id)))) << id;
  }
  // any order, repeats allowed: row k is id k's
  const std::vector<std::int64_t> ids{37, 3, 37};
  const Matrix X = w.embedding(ids);
  EXPECT_TRUE(bitwise_equal(X.row(0), full.row(37)));
  EXPECT_TRUE(bitwise_equal(X.row(1), full.row(3)));
  EXPECT_TRUE(bitwise_equal(X.row(2), full.row(37)));
  // rows of distinct ids are distinct draws
  EXPECT_EQ(shared_entries(full.row(3), full.row(37)), 0u);
}

TEST(Mamba2RandomWeights, TheDistributionsOfTheInitialisation) {
  const Mamba2Shape s = wide_shape();  // d 256, E 512, K 4, 128 heads, 5 layers
  const RandomWeights w(s, seed, 1);
  std::vector<double> W_in, W_out, conv, conv_bias, dt, A;
  for (int layer = 0; layer < 8; ++layer) {  // deeper than n_layer: any layer is drawn the same way
    const LayerWeights l = w.layer(layer);
    if (layer < 2) {
      W_in.insert(W_in.end(), l.W_in.values().begin(), l.W_in.values().end());
      W_out.insert(W_out.end(), l.W_out.values().begin(), l.W_out.values().end());
    }
    conv.insert(conv.end(), l.conv.values().begin(), l.conv.values().end());
    conv_bias.insert(conv_bias.end(), l.conv_bias.begin(), l.conv_bias.end());
    for (double v : l.dt_bias) dt.push_back(softplus(v));
    for (double v : l.A_log) A.push_back(std::exp(v));
    EXPECT_EQ(l.D, std::vector<double>(128, 1.0));
    EXPECT_EQ(l.norm, std::vector<double>(256, 1.0));
    EXPECT_EQ(l.gated_norm, std::vector<double>(512, 1.0));
  }
  expect_uniform(W_in, 1 / std::sqrt(256.0), "in_proj");                     // fan_in d
  expect_uniform(W_out, 1 / std::sqrt(512.0) / std::sqrt(5.0), "out_proj");  // fan_in E, / sqrt(n_layer)
  expect_uniform(conv, 0.5, "conv1d.weight");                                // fan_in K = 4
  expect_uniform(conv_bias, 0.5, "conv1d.bias");

  // dt log-uniform in [0.001, 0.1]: log dt has mean (log 0.001 + log 0.1) / 2, variance range^2 / 12
  const double lo = std::log(0.001), hi = std::log(0.1);
  const Moments m_dt = moments(dt);
  EXPECT_GE(m_dt.min, 0.001 * (1 - 1e-12));
  EXPECT_LE(m_dt.max, 0.1 * (1 + 1e-12));
  std::vector<double> log_dt(dt.size());
  std::transform(dt.begin(), dt.end(), log_dt.begin(), [](double v) { return std::log(v); });
  const Moments m_log = moments(log_dt);
  const double n = static_cast<double>(dt.size());
  EXPECT_LT(std::fabs(m_log.mean - (lo + hi) / 2), 5 * (hi - lo) / std::sqrt(12 * n));
  EXPECT_LT(std::fabs(m_log.var - (hi - lo) * (hi - lo) / 12), 5 * (hi - lo) * (hi - lo) * std::sqrt(1.0 / 180 / n));
  // A = -U(1, 16)
  const Moments m_A = moments(A);
  EXPECT_GE(m_A.min, 1.0);
  EXPECT_LE(m_A.max, 16.0);
  EXPECT_LT(m_A.min, 1.2);
  EXPECT_GT(m_A.max, 15.8);
  EXPECT_LT(std::fabs(m_A.mean - 8.5), 5 * 15 / std::sqrt(12 * n));

  // the embedding N(0, 0.02^2)
  std::vector<std::int64_t> ids(1008);
  std::iota(ids.begin(), ids.end(), 0);
  const Moments m_e = moments(w.embedding(ids).values());
  const double ne = static_cast<double>(m_e.n);
  EXPECT_LT(std::fabs(m_e.mean), 5 * 0.02 / std::sqrt(ne));
  EXPECT_LT(std::fabs(std::sqrt(m_e.var) - 0.02), 5 * 0.02 / std::sqrt(2 * ne));
}

TEST(Mamba2RandomWeights, DtFloorConvInitAndTheDepthOfTheRescaling) {
  Mamba2Shape s = wide_shape();
  s.dt_min = 1e-5;
  s.dt_max = 1e-3;
  s.dt_init_floor = 1e-4;  // half of log-uniform [1e-5, 1e-3] lies below: raised to the floor
  s.conv_init = 0.125;
  s.A_init_low = 2.0;
  s.A_init_high = 3.0;
  const LayerWeights l = RandomWeights(s, seed, 0).layer(0);
  std::size_t floored = 0;
  for (double v : l.dt_bias) {
    const double dt = softplus(v);
    EXPECT_GE(dt, 1e-4 * (1 - 1e-12));
    EXPECT_LE(dt, 1e-3 * (1 + 1e-12));
    floored += std::fabs(dt - 1e-4) <= 1e-15;
  }
  EXPECT_GT(floored, 40u);  // about 64 of 128
  EXPECT_LT(floored, 90u);
  expect_uniform(l.conv.values(), 0.125, "conv1d.weight with conv_init");
  expect_uniform(l.conv_bias, 0.5, "conv1d.bias (conv_init is the weight's only)");
  for (double a : l.A_log) {
    EXPECT_GE(std::exp(a), 2.0 * (1 - 1e-15));
    EXPECT_LE(std::exp(a), 3.0 * (1 + 1e-15));
  }
  // out_proj's bound follows n_layer of the shape, not the layer drawn: the same uniforms
  Mamba2Shape deeper = s;
  deeper.layers = 20;
  const LayerWeights d = RandomWeights(deeper, seed, 0).layer(0);
  for (std::size_t i = 0; i < d.W_out.size(); i += 97)
    EXPECT_NEAR(d.W_out.values()[i] * 2, l.W_out.values()[i], 1e-15 * std::fabs(l.W_out.values()[i])) << i;
  EXPECT_TRUE(bitwise_equal(d.W_in, l.W_in));
}

TEST(Mamba2RandomWeights, RefusesBadShapesAndRequests) {
  const RandomWeights w(small_shape(), seed, 0);
  EXPECT_THROW((void)w.embedding(std::vector<std::int64_t>{64}), Error);  // vocab_rows 64
  EXPECT_THROW((void)w.embedding(std::vector<std::int64_t>{-1}), Error);
  EXPECT_NO_THROW((void)w.embedding(std::vector<std::int64_t>{63, 50}));  // padding rows exist
  EXPECT_THROW((void)w.layer(-1), Error);
  EXPECT_NO_THROW((void)w.layer(100));
  const auto refused = [](auto change) {
    Mamba2Shape s = small_shape();
    change(s);
    EXPECT_THROW(RandomWeights(s, seed, 0), Error);
  };
  refused([](Mamba2Shape& s) { s.d_model = 0; });
  refused([](Mamba2Shape& s) { s.layers = 0; });
  refused([](Mamba2Shape& s) { s.d_state = -1; });
  refused([](Mamba2Shape& s) { s.headdim = 24; });  // does not divide E = 64
  refused([](Mamba2Shape& s) { s.ngroups = 3; });   // does not divide 4 heads
  refused([](Mamba2Shape& s) { s.vocab_rows = 49; });
  refused([](Mamba2Shape& s) { s.A_init_low = 0; });
  refused([](Mamba2Shape& s) { s.A_init_low = 5, s.A_init_high = 4; });
  refused([](Mamba2Shape& s) { s.dt_min = 0.2; });  // above dt_max
  refused([](Mamba2Shape& s) { s.dt_init_floor = -1; });
  refused([](Mamba2Shape& s) { s.conv_init = std::nan(""); });
  refused([](Mamba2Shape& s) { s.d_model = 1 << 30; });  // widths beyond an int
}

// The initialisation through the forward pass: the blocks keep every entry finite and change the
// residual stream, and the final RMSNorm (weight 1) scales each row to mean square m / (m + eps).
TEST(Mamba2RandomWeights, EmbedAndApplyTheBlocks) {
  const Mamba2Shape s = small_shape();
  const RandomWeights w(s, seed, 4);
  const std::vector<std::int64_t> ids{3, 17, 40, 17, 2, 49, 0, 11, 5};
  Matrix X = w.embedding(ids);
  const Matrix X0 = X;
  for (int layer = 0; layer < s.layers; ++layer) apply_block(s, w.layer(layer), {}, X);
  double change = 0, norm0 = 0;
  for (std::size_t i = 0; i < X.size(); ++i) {
    ASSERT_TRUE(std::isfinite(X.values()[i])) << i;
    change += (X.values()[i] - X0.values()[i]) * (X.values()[i] - X0.values()[i]);
    norm0 += X0.values()[i] * X0.values()[i];
  }
  EXPECT_GT(change, 0.0);
  EXPECT_LT(std::sqrt(change / norm0), 1e3);
  const Matrix XL = X;
  apply_final_norm(s, w.final_norm(), {}, X);
  for (std::size_t i = 0; i < X.rows(); ++i) {
    double before = 0, after = 0;
    for (std::size_t j = 0; j < 32; ++j) before += XL(i, j) * XL(i, j) / 32, after += X(i, j) * X(i, j) / 32;
    EXPECT_NEAR(after, before / (before + 1e-5), 1e-12) << i;  // RMSNorm with weight 1 and eps 1e-5
  }
}

}  // namespace
}  // namespace rcsweep::models::mamba2
