// models/encoder: RandomWeights, Hugging Face's published initialisation of BERT, RoBERTa and
// ALBERT from keyed Philox streams (encoder.hpp, random_weights.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "models/encoder/encoder.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::encoder {
namespace {

constexpr std::uint64_t seed = 20250311;

EncoderShape bert_shape() {
  EncoderShape s;
  s.family = Family::bert;
  s.vocab = 100;
  s.max_positions = 64;
  s.type_vocab = 2;
  s.d = 16;
  s.heads = 2;
  s.intermediate = 32;
  s.layers = 3;
  s.embedding_size = 16;
  s.pad_token_id = 0;
  s.initializer_range = 0.02;
  return s;
}

EncoderShape roberta_shape() {
  EncoderShape s = bert_shape();
  s.family = Family::roberta;
  s.pad_token_id = 1;
  return s;
}

EncoderShape albert_shape() {
  EncoderShape s = bert_shape();
  s.family = Family::albert;
  s.embedding_size = 8;
  s.layers = 4;
  s.hidden_groups = 2;
  return s;
}

bool bitwise_equal(const Matrix& a, const Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

bool bitwise_equal(std::span<const double> a, std::span<const double> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Entries that are equal in both (two independent draws share none).
std::size_t shared_entries(const Matrix& a, const Matrix& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a.data()[i] == b.data()[i];
  return n;
}

std::vector<const Matrix*> matrices(const BlockWeights& w) { return {&w.W_Q, &w.W_K, &w.W_V, &w.W_O, &w.W_1, &w.W_2}; }

TEST(RandomWeights, BitwiseReproducible) {
  for (const EncoderShape& s : {bert_shape(), roberta_shape(), albert_shape()}) {
    const RandomWeights a(s, seed, 3), b(s, seed, 3);
    const BlockWeights wa = a.block(1), wb = b.block(1);
    for (std::size_t k = 0; k < 6; ++k) EXPECT_TRUE(bitwise_equal(*matrices(wa)[k], *matrices(wb)[k])) << k;
    const EmbeddingRequest request{{2, 5, 99}, 17};
    const EmbeddingWeights ea = a.embeddings(request), eb = b.embeddings(request);
    EXPECT_TRUE(bitwise_equal(ea.word, eb.word));
    EXPECT_TRUE(bitwise_equal(ea.position, eb.position));
    EXPECT_TRUE(bitwise_equal(ea.token_type, eb.token_type));
    EXPECT_TRUE(bitwise_equal(ea.projection, eb.projection));
  }
}

TEST(RandomWeights, DrawsGroupsAndTensorsDiffer) {
  const EncoderShape s = bert_shape();
  const RandomWeights draw0(s, seed, 0), draw1(s, seed, 1), other_seed(s, seed + 1, 0);
  const BlockWeights g0 = draw0.block(0), g1 = draw0.block(1), d1 = draw1.block(0), s1 = other_seed.block(0);
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(shared_entries(*matrices(g0)[k], *matrices(g1)[k]), 0u) << "groups, tensor " << k;
    EXPECT_EQ(shared_entries(*matrices(g0)[k], *matrices(d1)[k]), 0u) << "draws, tensor " << k;
    EXPECT_EQ(shared_entries(*matrices(g0)[k], *matrices(s1)[k]), 0u) << "seeds, tensor " << k;
  }
  const auto all = matrices(g0);
  for (std::size_t a = 0; a < 4; ++a)  // the four d x d projections are four streams
    for (std::size_t b = a + 1; b < 4; ++b) EXPECT_EQ(shared_entries(*all[a], *all[b]), 0u) << a << " " << b;
  const EmbeddingWeights e = draw0.embeddings({{1, 2, 3}, 2});
  EXPECT_EQ(shared_entries(e.word, e.position), 0u);
  EXPECT_EQ(shared_entries(e.position, e.token_type), 0u);
  EXPECT_EQ(shared_entries(draw0.embeddings({{3}, 0}).word, draw1.embeddings({{3}, 0}).word), 0u);
}

TEST(RandomWeights, ARowAloneIsTheRowAmongOthers) {
  const RandomWeights w(bert_shape(), seed, 2);
  const EmbeddingWeights alone = w.embeddings({{37}, 0});
  const EmbeddingWeights among = w.embeddings({{3, 37, 99}, 20});
  EXPECT_TRUE(bitwise_equal(alone.word.row(0), among.word.row(1)));
  EXPECT_TRUE(bitwise_equal(alone.position.row(0), among.position.row(0)));
  EXPECT_TRUE(bitwise_equal(alone.token_type, among.token_type));
  // the first positions are the same whatever the largest position asked for
  const EmbeddingWeights more = w.embeddings({{37}, 40});
  for (std::size_t p = 0; p <= 20; ++p) EXPECT_TRUE(bitwise_equal(among.position.row(p), more.position.row(p))) << p;
}

// The documented layout: entry (i, j) of a rows x cols tensor is element i cols + j of its stream
// {seed, draw, T = 0, d, layer, tag, head 0}, times initializer_range; layer = group for a block's
// tensors, 0 for the embedding tables.
TEST(RandomWeights, StreamsAreLaidOutRowMajorOnTheStoredLayout) {
  const EncoderShape s = albert_shape();
  const std::uint32_t draw = 5;
  const RandomWeights w(s, seed, draw);
  const auto key = [&](std::uint32_t layer, rng::Tensor tensor) {
    return rng::StreamKey{
        .seed = seed, .replicate = draw, .T = 0, .d = 16, .layer = layer, .tensor = tensor, .head = 0};
  };
  const auto expected = [&](const rng::StreamKey& k, std::size_t first, std::size_t n) {
    std::vector<double> v(n);
    rng::fill_normal(k, first, v);
    for (double& x : v) x *= s.initializer_range;
    return v;
  };
  const EmbeddingWeights e = w.embeddings({{7, 42}, 3});
  const std::size_t E = 8;
  EXPECT_TRUE(bitwise_equal(e.word.row(1), expected(key(0, rng::Tensor::encoder_word), 42 * E, E)));
  EXPECT_TRUE(bitwise_equal(e.position.values(), expected(key(0, rng::Tensor::encoder_position), 0, 4 * E)));
  EXPECT_TRUE(bitwise_equal(e.token_type.values(), expected(key(0, rng::Tensor::encoder_token_type), 0, 2 * E)));
  EXPECT_TRUE(bitwise_equal(e.projection.values(), expected(key(0, rng::Tensor::encoder_projection), 0, E * 16)));
  const BlockWeights b = w.block(1);
  EXPECT_TRUE(bitwise_equal(b.W_Q.values(), expected(key(1, rng::Tensor::encoder_query), 0, 16 * 16)));
  EXPECT_TRUE(bitwise_equal(b.W_O.values(), expected(key(1, rng::Tensor::encoder_output), 0, 16 * 16)));
  EXPECT_EQ(b.W_1.rows(), 16u);
  EXPECT_EQ(b.W_1.cols(), 32u);
  EXPECT_TRUE(bitwise_equal(b.W_1.values(), expected(key(1, rng::Tensor::encoder_mlp_in), 0, 16 * 32)));
  EXPECT_TRUE(bitwise_equal(b.W_2.values(), expected(key(1, rng::Tensor::encoder_mlp_out), 0, 32 * 16)));
}

bool zero_row(std::span<const double> row) {
  for (double x : row)
    if (x != 0.0) return false;
  return true;
}

TEST(RandomWeights, PaddingRowsAreZero) {
  const EmbeddingWeights bert = RandomWeights(bert_shape(), seed, 0).embeddings({{0, 1, 2}, 3});
  EXPECT_TRUE(zero_row(bert.word.row(0)));  // pad_token_id 0
  EXPECT_FALSE(zero_row(bert.word.row(1)));
  EXPECT_FALSE(zero_row(bert.position.row(0)));  // BERT's positions have no padding_idx
  const EmbeddingWeights roberta = RandomWeights(roberta_shape(), seed, 0).embeddings({{0, 1, 2}, 3});
  EXPECT_FALSE(zero_row(roberta.word.row(0)));
  EXPECT_TRUE(zero_row(roberta.word.row(1)));  // pad_token_id 1
  EXPECT_FALSE(zero_row(roberta.position.row(0)));
  EXPECT_TRUE(zero_row(roberta.position.row(1)));  // RobertaEmbeddings' padding_idx
  EXPECT_FALSE(zero_row(roberta.position.row(2)));
  const EmbeddingWeights albert = RandomWeights(albert_shape(), seed, 0).embeddings({{0, 1}, 1});
  EXPECT_TRUE(zero_row(albert.word.row(0)));
  EXPECT_FALSE(zero_row(albert.position.row(0)));
}

// Sample mean and standard deviation of large tables within 5 standard errors of 0 and
// initializer_range (the standard error of the sample sd is sigma / sqrt(2n)).
TEST(RandomWeights, EntriesHaveTheInitializerRangeAsStandardDeviation) {
  EncoderShape s = bert_shape();
  s.d = 256;
  s.heads = 4;
  s.embedding_size = 256;
  s.intermediate = 1024;
  s.max_positions = 1024;
  s.initializer_range = 0.037;
  const RandomWeights w(s, seed, 1);
  const auto check = [&](std::span<const double> v, const char* what) {
    long double sum = 0, squares = 0;
    for (double x : v) sum += x, squares += static_cast<long double>(x) * x;
    const auto n = static_cast<double>(v.size());
    const auto mean = static_cast<double>(sum / v.size());
    const double sd = std::sqrt(static_cast<double>(squares / v.size()) - mean * mean);
    const double r = s.initializer_range;
    EXPECT_LT(std::fabs(mean), 5.0 * r / std::sqrt(n)) << what;
    EXPECT_LT(std::fabs(sd - r), 5.0 * r / std::sqrt(2.0 * n)) << what;
  };
  const BlockWeights b = w.block(2);
  check(b.W_1.values(), "W_1");
  check(b.W_Q.values(), "W_Q");
  check(w.embeddings({{}, 1023}).position.values(), "position embedding");
}

TEST(RandomWeights, BiasesAreZeroAndNormsTheIdentity) {
  const RandomWeights w(albert_shape(), seed, 0);
  const BlockWeights b = w.block(0);
  for (const auto* v : {&b.b_Q, &b.b_K, &b.b_V, &b.b_O, &b.b_2}) EXPECT_EQ(*v, std::vector<double>(16, 0.0));
  EXPECT_EQ(b.b_1, std::vector<double>(32, 0.0));
  for (const auto* n : {&b.norm_attention, &b.norm_mlp}) {
    EXPECT_EQ(n->gamma, std::vector<double>(16, 1.0));
    EXPECT_EQ(n->beta, std::vector<double>(16, 0.0));
  }
  const EmbeddingWeights e = w.embeddings({{4}, 2});
  EXPECT_EQ(e.norm.gamma, std::vector<double>(8, 1.0));  // embedding_size wide
  EXPECT_EQ(e.norm.beta, std::vector<double>(8, 0.0));
  EXPECT_EQ(e.projection.rows(), 8u);
  EXPECT_EQ(e.projection.cols(), 16u);
  EXPECT_EQ(e.projection_bias, std::vector<double>(16, 0.0));
  EXPECT_EQ(e.word.cols(), 8u);
  EXPECT_EQ(e.position.rows(), 3u);
  EXPECT_EQ(e.token_type.rows(), 2u);
  EXPECT_TRUE(RandomWeights(bert_shape(), seed, 0).embeddings({{4}, 2}).projection.empty());
}

TEST(RandomWeights, GroupsAreAlbertsSharedGroupsOrTheLayers) {
  const RandomWeights albert(albert_shape(), seed, 0);
  EXPECT_NO_THROW(albert.block(1));
  EXPECT_THROW(albert.block(2), Error);  // hidden_groups = 2
  const RandomWeights bert(bert_shape(), seed, 0);
  EXPECT_NO_THROW(bert.block(2));
  EXPECT_THROW(bert.block(3), Error);  // 3 layers
  EXPECT_THROW(bert.block(-1), Error);
}

TEST(RandomWeights, RefusesBadShapesAndRequests) {
  const RandomWeights w(bert_shape(), seed, 0);
  EXPECT_THROW(w.embeddings({{100}, 0}), Error);  // vocab_size 100
  EXPECT_THROW(w.embeddings({{-1}, 0}), Error);
  EXPECT_THROW(w.embeddings({{5, 3}, 0}), Error);  // not ascending
  EXPECT_THROW(w.embeddings({{3, 3}, 0}), Error);  // not distinct
  EXPECT_THROW(w.embeddings({{3}, 64}), Error);    // max_position_embeddings 64
  EXPECT_NO_THROW(w.embeddings({{99}, 63}));
  EncoderShape odd = bert_shape();
  odd.heads = 3;
  EXPECT_THROW(RandomWeights(odd, seed, 0), Error);
  EncoderShape narrow = bert_shape();
  narrow.embedding_size = 8;  // only ALBERT projects
  EXPECT_THROW(RandomWeights(narrow, seed, 0), Error);
  EncoderShape groups = albert_shape();
  groups.hidden_groups = 5;  // more groups than layers
  EXPECT_THROW(RandomWeights(groups, seed, 0), Error);
}

// The initialisation through the forward pass: the embedding is a LayerNorm with gamma 1, beta 0
// (rows of zero mean and unit variance), and a block keeps every entry finite.
TEST(RandomWeights, EmbedAndApplyABlock) {
  for (const EncoderShape& s : {bert_shape(), roberta_shape(), albert_shape()}) {
    const RandomWeights w(s, seed, 4);
    const Excerpt ex{{2, 17, 40, 17, s.pad_token_id}, {0, 0, 1, 1, 0}, {true, true, true, true, false}};
    const EmbeddingRequest request{{s.pad_token_id, 2, 17, 40}, 6};  // pad_token_id 0 or 1
    Matrix X = embed(s, w.embeddings(request), request, ex);
    ASSERT_EQ(X.cols(), 16u);
    if (s.family != Family::albert)
      for (std::size_t i = 0; i < X.rows(); ++i) {
        double mean = 0, var = 0;
        for (double x : X.row(i)) mean += x / 16;
        for (double x : X.row(i)) var += (x - mean) * (x - mean) / 16;
        EXPECT_NEAR(mean, 0.0, 1e-12);
        EXPECT_NEAR(var, 1.0, 1e-6);  // var / (var + eps), eps = 1e-12, var ~ 2 r^2
      }
    for (int layer = 1; layer <= s.layers; ++layer) apply_block(s, w.block(s.group_of(layer)), {}, ex.real, X);
    for (double x : X.values()) EXPECT_TRUE(std::isfinite(x));
  }
}

}  // namespace
}  // namespace rcsweep::models::encoder
