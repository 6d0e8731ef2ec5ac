// CheckpointWeights and encoder_shape: tiny BERT, RoBERTa and ALBERT folders (d = 8, 2 heads, 2
// layers, vocab 20) written tensor by tensor under the Hugging Face names spelt out here, read back
// exactly (Linear weights transposed, only the asked rows of the embeddings, F32, F16 and BF16), and
// every refusal naming its file and tensor or key.
#include "models/encoder/checkpoint_weights.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/model_folder.hpp"
#include "../../checkpoint/checkpoint_test_support.hpp"

namespace rcsweep::models::encoder {
namespace {

using checkpoint::test::config_error;
using checkpoint::test::TempDir;
using checkpoint::test::Writer;

constexpr int d = 8, heads = 2, layers = 2, vocab = 20, max_pos = 16, types = 2, inner = 12, albert_E = 4;

// A dyadic value exact in F32, F16 and BF16 (at most 6 significant bits): tensor k, element i.
// Element (r, c) of an [n, m] tensor differs from element (c, r) (61 is prime).
double value(int k, std::size_t i) { return static_cast<double>(static_cast<int>((k * 7 + i * 13) % 61) - 30) / 8.0; }

// IEEE binary16 bits of a normal or zero value with at most 11 significant bits.
std::uint16_t half_bits(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m 2^e, m in [0.5, 1)
  const auto mantissa = static_cast<std::uint16_t>(std::ldexp(2 * m - 1, 10));
  EXPECT_EQ(std::ldexp(1 + std::ldexp(mantissa, -10), e - 1), std::fabs(v));
  return static_cast<std::uint16_t>((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) | mantissa);
}
std::uint16_t bfloat16_bits(double v) {
  const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
  EXPECT_EQ(bits & 0xffffu, 0u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// The tensors of a tiny checkpoint: name -> shape and values, written in one dtype.
struct Tensor {
  std::vector<std::size_t> shape;
  std::vector<double> values;
};
using Tensors = std::map<std::string, Tensor>;

void put(Tensors& t, const std::string& name, std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  const int k = static_cast<int>(t.size()) + 1;
  Tensor x{std::move(shape), {}};
  for (std::size_t i = 0; i < n; ++i) x.values.push_back(value(k, i));
  t[name] = std::move(x);
}

std::size_t u(int v) { return static_cast<std::size_t>(v); }

// BERT's (and RoBERTa's) names, as BertModel's state_dict has them.
Tensors bert_tensors(const std::string& p, const std::string& norm_weight = "weight",
                     const std::string& norm_bias = "bias") {
  Tensors t;
  put(t, p + "embeddings.word_embeddings.weight", {u(vocab), u(d)});
  put(t, p + "embeddings.position_embeddings.weight", {u(max_pos), u(d)});
  put(t, p + "embeddings.token_type_embeddings.weight", {u(types), u(d)});
  put(t, p + "embeddings.LayerNorm." + norm_weight, {u(d)});
  put(t, p + "embeddings.LayerNorm." + norm_bias, {u(d)});
  for (int l = 0; l < layers; ++l) {
    const std::string L = p + "encoder.layer." + std::to_string(l) + ".";
    for (const char* qkv : {"query", "key", "value"}) {
      put(t, L + "attention.self." + qkv + ".weight", {u(d), u(d)});
      put(t, L + "attention.self." + qkv + ".bias", {u(d)});
    }
    put(t, L + "attention.output.dense.weight", {u(d), u(d)});
    put(t, L + "attention.output.dense.bias", {u(d)});
    put(t, L + "attention.output.LayerNorm." + norm_weight, {u(d)});
    put(t, L + "attention.output.LayerNorm." + norm_bias, {u(d)});
    put(t, L + "intermediate.dense.weight", {u(inner), u(d)});
    put(t, L + "intermediate.dense.bias", {u(inner)});
    put(t, L + "output.dense.weight", {u(d), u(inner)});
    put(t, L + "output.dense.bias", {u(d)});
    put(t, L + "output.LayerNorm." + norm_weight, {u(d)});
    put(t, L + "output.LayerNorm." + norm_bias, {u(d)});
  }
  return t;
}

// ALBERT's names (AlbertModel, one layer group, inner_group_num 1).
Tensors albert_tensors(const std::string& p) {
  Tensors t;
  put(t, p + "embeddings.word_embeddings.weight", {u(vocab), u(albert_E)});
  put(t, p + "embeddings.position_embeddings.weight", {u(max_pos), u(albert_E)});
  put(t, p + "embeddings.token_type_embeddings.weight", {u(types), u(albert_E)});
  put(t, p + "embeddings.LayerNorm.weight", {u(albert_E)});
  put(t, p + "embeddings.LayerNorm.bias", {u(albert_E)});
  put(t, p + "encoder.embedding_hidden_mapping_in.weight", {u(d), u(albert_E)});
  put(t, p + "encoder.embedding_hidden_mapping_in.bias", {u(d)});
  const std::string L = p + "encoder.albert_layer_groups.0.albert_layers.0.";
  for (const char* lin : {"query", "key", "value", "dense"}) {
    put(t, L + "attention." + lin + ".weight", {u(d), u(d)});
    put(t, L + "attention." + lin + ".bias", {u(d)});
  }
  put(t, L + "attention.LayerNorm.weight", {u(d)});
  put(t, L + "attention.LayerNorm.bias", {u(d)});
  put(t, L + "ffn.weight", {u(inner), u(d)});
  put(t, L + "ffn.bias", {u(inner)});
  put(t, L + "ffn_output.weight", {u(d), u(inner)});
  put(t, L + "ffn_output.bias", {u(d)});
  put(t, L + "full_layer_layer_norm.weight", {u(d)});
  put(t, L + "full_layer_layer_norm.bias", {u(d)});
  return t;
}

nlohmann::json config_of(const std::string& model_type) {
  nlohmann::json c = {{"model_type", model_type},   {"vocab_size", vocab},        {"max_position_embeddings", max_pos},
                      {"type_vocab_size", types},   {"hidden_size", d},           {"num_attention_heads", heads},
                      {"intermediate_size", inner}, {"num_hidden_layers", layers}};
  if (model_type == "albert") c["embedding_size"] = albert_E;
  return c;
}

std::string shape_json(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Writes config.json and model.safetensors (every tensor in `dtype`, plus tensors the encoder does
// not use: a pooler, an MLM head, the I64 position_ids).
void write_folder(const TempDir& dir, const nlohmann::json& config, const Tensors& tensors,
                  const std::string& dtype = "F32") {
  checkpoint::test::write_bytes(dir / "config.json", config.dump());
  Writer w;
  w.add("pooler.dense.weight", "F32", "[1,1]", checkpoint::test::bytes_of(std::vector<float>{1}))
      .add("cls.predictions.bias", "F32", "[2]", checkpoint::test::bytes_of(std::vector<float>{1, 2}))
      .add("embeddings.position_ids", "I64", "[1,2]", std::string(16, '\0'));
  for (const auto& [name, t] : tensors) {
    std::string bytes;
    if (dtype == "F32") {
      std::vector<float> v(t.values.begin(), t.values.end());
      bytes = checkpoint::test::bytes_of(v);
    } else {
      std::vector<std::uint16_t> v;
      for (double x : t.values) v.push_back(dtype == "F16" ? half_bits(x) : bfloat16_bits(x));
      bytes = checkpoint::test::bytes_of(v);
    }
    w.add(name, dtype, shape_json(t.shape), bytes);
  }
  w.write(dir / "model.safetensors");
}

// W (in x out) is the stored [out, in] transposed: W(i, j) == stored[j][i].
void expect_transposed(const Matrix& W, const Tensor& stored, const std::string& name) {
  ASSERT_EQ(stored.shape.size(), 2u) << name;
  ASSERT_EQ(W.rows(), stored.shape[1]) << name;
  ASSERT_EQ(W.cols(), stored.shape[0]) << name;
  for (std::size_t i = 0; i < W.rows(); ++i)
    for (std::size_t j = 0; j < W.cols(); ++j) ASSERT_EQ(W(i, j), stored.values[j * W.rows() + i]) << name;
}
void expect_values(const std::vector<double>& got, const Tensor& stored, const std::string& name) {
  EXPECT_EQ(got, stored.values) << name;
}

// Every field of block(l) against the tensors of BERT's layer l.
void expect_bert_block(const CheckpointWeights& w, const Tensors& t, const std::string& p, int l) {
  const BlockWeights b = w.block(l);
  const std::string L = p + "encoder.layer." + std::to_string(l) + ".";
  const auto at = [&](const std::string& n) -> const Tensor& { return t.at(L + n); };
  expect_transposed(b.W_Q, at("attention.self.query.weight"), "W_Q");
  expect_transposed(b.W_K, at("attention.self.key.weight"), "W_K");
  expect_transposed(b.W_V, at("attention.self.value.weight"), "W_V");
  expect_transposed(b.W_O, at("attention.output.dense.weight"), "W_O");
  expect_transposed(b.W_1, at("intermediate.dense.weight"), "W_1");
  expect_transposed(b.W_2, at("output.dense.weight"), "W_2");
  EXPECT_EQ(b.W_1.rows(), u(d));
  EXPECT_EQ(b.W_1.cols(), u(inner));
  expect_values(b.b_Q, at("attention.self.query.bias"), "b_Q");
  expect_values(b.b_K, at("attention.self.key.bias"), "b_K");
  expect_values(b.b_V, at("attention.self.value.bias"), "b_V");
  expect_values(b.b_O, at("attention.output.dense.bias"), "b_O");
  expect_values(b.b_1, at("intermediate.dense.bias"), "b_1");
  expect_values(b.b_2, at("output.dense.bias"), "b_2");
  const bool legacy = !t.contains(L + "output.LayerNorm.weight");
  const std::string g = legacy ? "gamma" : "weight", be = legacy ? "beta" : "bias";
  expect_values(b.norm_attention.gamma, at("attention.output.LayerNorm." + g), "attention gamma");
  expect_values(b.norm_attention.beta, at("attention.output.LayerNorm." + be), "attention beta");
  expect_values(b.norm_mlp.gamma, at("output.LayerNorm." + g), "mlp gamma");
  expect_values(b.norm_mlp.beta, at("output.LayerNorm." + be), "mlp beta");
}

// Rows of the word embedding for the ids asked for only, positions 0..max_position, every type.
void expect_embeddings(const CheckpointWeights& w, const Tensors& t, const std::string& p, std::size_t E) {
  const EmbeddingRequest request{.ids = {0, 3, 7, 19}, .max_position = 5};
  const EmbeddingWeights e = w.embeddings(request);
  const Tensor& word = t.at(p + "embeddings.word_embeddings.weight");
  ASSERT_EQ(e.word.rows(), request.ids.size());
  ASSERT_EQ(e.word.cols(), E);
  for (std::size_t r = 0; r < request.ids.size(); ++r)
    for (std::size_t c = 0; c < E; ++c)
      EXPECT_EQ(e.word(r, c), word.values[static_cast<std::size_t>(request.ids[r]) * E + c]) << r << " " << c;
  const Tensor& position = t.at(p + "embeddings.position_embeddings.weight");
  ASSERT_EQ(e.position.rows(), 6u);
  EXPECT_EQ(std::vector<double>(e.position.values().begin(), e.position.values().end()),
            std::vector<double>(position.values.begin(), position.values.begin() + static_cast<long>(6 * E)));
  ASSERT_EQ(e.token_type.rows(), u(types));
  EXPECT_EQ(std::vector<double>(e.token_type.values().begin(), e.token_type.values().end()),
            t.at(p + "embeddings.token_type_embeddings.weight").values);
  const bool legacy = !t.contains(p + "embeddings.LayerNorm.weight");
  expect_values(e.norm.gamma, t.at(p + "embeddings.LayerNorm." + (legacy ? "gamma" : "weight")), "gamma");
  expect_values(e.norm.beta, t.at(p + "embeddings.LayerNorm." + (legacy ? "beta" : "bias")), "beta");
}

std::shared_ptr<const checkpoint::ModelFolder> folder(const TempDir& dir) {
  return std::make_shared<const checkpoint::ModelFolder>(checkpoint::ModelFolder::open(dir.path()));
}

TEST(CheckpointWeights, BertWithItsPrefixInF32) {
  TempDir dir;
  const Tensors t = bert_tensors("bert.");
  write_folder(dir, config_of("bert"), t);
  const CheckpointWeights w(folder(dir));
  EXPECT_EQ(w.prefix(), "bert.");
  const EncoderShape& s = w.shape();
  EXPECT_EQ(s.family, Family::bert);
  EXPECT_EQ(s.vocab, vocab);
  EXPECT_EQ(s.max_positions, max_pos);
  EXPECT_EQ(s.type_vocab, types);
  EXPECT_EQ(s.d, d);
  EXPECT_EQ(s.heads, heads);
  EXPECT_EQ(s.intermediate, inner);
  EXPECT_EQ(s.layers, layers);
  EXPECT_EQ(s.embedding_size, d);
  EXPECT_EQ(s.pad_token_id, 0);
  EXPECT_EQ(s.layer_norm_eps, 1e-12);
  EXPECT_EQ(s.initializer_range, 0.02);
  EXPECT_EQ(s.activation, Activation::gelu);
  for (int l = 0; l < layers; ++l) expect_bert_block(w, t, "bert.", l);
  expect_embeddings(w, t, "bert.", d);
  EXPECT_TRUE(w.embeddings({.ids = {}, .max_position = 0}).projection.empty());
  EXPECT_EQ(w.stored_name(Role::key, 1), "bert.encoder.layer.1.attention.self.key.weight");
}

TEST(CheckpointWeights, BertBaseModelWithoutPrefixInF16) {
  TempDir dir;
  const Tensors t = bert_tensors("");
  write_folder(dir, config_of("bert"), t, "F16");
  const auto w = CheckpointWeights::open(dir.path());
  EXPECT_EQ(w->prefix(), "");
  for (int l = 0; l < layers; ++l) expect_bert_block(*w, t, "", l);
  expect_embeddings(*w, t, "", d);
}

TEST(CheckpointWeights, RobertaInBF16) {
  TempDir dir;
  const Tensors t = bert_tensors("roberta.");
  nlohmann::json c = config_of("roberta");
  c["hidden_act"] = "gelu_new";
  c["layer_norm_eps"] = 1e-5;
  write_folder(dir, c, t, "BF16");
  const CheckpointWeights w(folder(dir));
  EXPECT_EQ(w.shape().family, Family::roberta);
  EXPECT_EQ(w.shape().pad_token_id, 1);  // RobertaConfig's default
  EXPECT_EQ(w.shape().activation, Activation::gelu_tanh);
  EXPECT_EQ(w.shape().layer_norm_eps, 1e-5);
  EXPECT_EQ(w.prefix(), "roberta.");
  for (int l = 0; l < layers; ++l) expect_bert_block(w, t, "roberta.", l);
  expect_embeddings(w, t, "roberta.", d);
}

TEST(CheckpointWeights, AlbertOneSharedGroupAndTheProjection) {
  TempDir dir;
  const std::string p = "albert.";
  const Tensors t = albert_tensors(p);
  write_folder(dir, config_of("albert"), t);
  const CheckpointWeights w(folder(dir));
  const EncoderShape& s = w.shape();
  EXPECT_EQ(s.family, Family::albert);
  EXPECT_EQ(s.embedding_size, albert_E);
  EXPECT_EQ(s.hidden_groups, 1);
  EXPECT_EQ(s.inner_group_num, 1);
  EXPECT_EQ(s.activation, Activation::gelu_tanh);  // AlbertConfig's default "gelu_new"
  EXPECT_EQ(s.groups(), 1);
  const BlockWeights b = w.block(0);
  const std::string L = p + "encoder.albert_layer_groups.0.albert_layers.0.";
  expect_transposed(b.W_Q, t.at(L + "attention.query.weight"), "W_Q");
  expect_transposed(b.W_K, t.at(L + "attention.key.weight"), "W_K");
  expect_transposed(b.W_V, t.at(L + "attention.value.weight"), "W_V");
  expect_transposed(b.W_O, t.at(L + "attention.dense.weight"), "W_O");
  expect_transposed(b.W_1, t.at(L + "ffn.weight"), "W_1");
  expect_transposed(b.W_2, t.at(L + "ffn_output.weight"), "W_2");
  expect_values(b.b_Q, t.at(L + "attention.query.bias"), "b_Q");
  expect_values(b.b_O, t.at(L + "attention.dense.bias"), "b_O");
  expect_values(b.b_1, t.at(L + "ffn.bias"), "b_1");
  expect_values(b.b_2, t.at(L + "ffn_output.bias"), "b_2");
  expect_values(b.norm_attention.gamma, t.at(L + "attention.LayerNorm.weight"), "attention gamma");
  expect_values(b.norm_attention.beta, t.at(L + "attention.LayerNorm.bias"), "attention beta");
  expect_values(b.norm_mlp.gamma, t.at(L + "full_layer_layer_norm.weight"), "mlp gamma");
  expect_values(b.norm_mlp.beta, t.at(L + "full_layer_layer_norm.bias"), "mlp beta");
  EXPECT_THROW((void)w.block(1), Error);  // one group, shared by both layers
  expect_embeddings(w, t, p, albert_E);
  const EmbeddingWeights e = w.embeddings({.ids = {1}, .max_position = 0});
  expect_transposed(e.projection, t.at(p + "encoder.embedding_hidden_mapping_in.weight"), "projection");
  EXPECT_EQ(e.projection.rows(), u(albert_E));
  expect_values(e.projection_bias, t.at(p + "encoder.embedding_hidden_mapping_in.bias"), "projection bias");
}

TEST(CheckpointWeights, OlderLayerNormNamesGammaAndBeta) {
  TempDir dir;
  const Tensors t = bert_tensors("bert.", "gamma", "beta");
  write_folder(dir, config_of("bert"), t);
  const CheckpointWeights w(folder(dir));
  expect_bert_block(w, t, "bert.", 1);
  expect_embeddings(w, t, "bert.", d);
  EXPECT_EQ(w.stored_name(Role::mlp_norm_beta, 1), "bert.encoder.layer.1.output.LayerNorm.beta");
}

TEST(CheckpointWeights, BlocksFromManyThreadsAtOnce) {
  TempDir dir;
  const Tensors t = bert_tensors("");
  write_folder(dir, config_of("bert"), t, "BF16");
  const CheckpointWeights w(folder(dir));
  const BlockWeights want = w.block(1);
  std::vector<BlockWeights> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = w.block(1); });
  for (std::thread& th : threads) th.join();
  for (const BlockWeights& b : got) {
    EXPECT_EQ(b.W_Q, want.W_Q);
    EXPECT_EQ(b.W_2, want.W_2);
    EXPECT_EQ(b.norm_mlp.beta, want.norm_mlp.beta);
  }
}

TEST(CheckpointWeights, EmbeddingsRefuseIdsAndPositionsOutsideTheTables) {
  TempDir dir;
  write_folder(dir, config_of("bert"), bert_tensors(""));
  const CheckpointWeights w(folder(dir));
  EXPECT_THROW((void)w.embeddings({.ids = {vocab}, .max_position = 0}), Error);
  EXPECT_THROW((void)w.embeddings({.ids = {-1}, .max_position = 0}), Error);
  EXPECT_THROW((void)w.embeddings({.ids = {1}, .max_position = max_pos}), Error);
  EXPECT_THROW((void)w.block(layers), Error);
  EXPECT_THROW((void)w.block(-1), Error);
  EXPECT_EQ(w.embeddings({.ids = {1}, .max_position = max_pos - 1}).position.rows(), u(max_pos));
}

// The message of building the weights of `dir`; it must name `file`.
std::string refusal(const TempDir& dir, const std::string& file) {
  const std::string m = config_error([&] { (void)CheckpointWeights::open(dir.path()); });
  EXPECT_NE(m.find((dir / file).string() + ": "), std::string::npos) << m;
  return m;
}

TEST(CheckpointWeights, RefusesMissingMisshapedAndIntegerTensorsAllAtOnce) {
  TempDir dir;
  Tensors t = bert_tensors("bert.");
  t.erase("bert.encoder.layer.1.attention.self.key.weight");
  t["bert.encoder.layer.0.intermediate.dense.weight"].shape = {u(d), u(inner)};  // stored the other way round
  const std::string bias = "bert.encoder.layer.1.output.dense.bias";
  t.erase(bias);
  checkpoint::test::write_bytes(dir / "config.json", config_of("bert").dump());
  Writer w;
  for (const auto& [name, x] : t)
    w.add(name, "F32", shape_json(x.shape),
          checkpoint::test::bytes_of(std::vector<float>(x.values.begin(), x.values.end())));
  w.add(bias, "I32", "[8]", std::string(32, '\0'));  // an integer bias
  w.write(dir / "model.safetensors");

  const std::string m = refusal(dir, "model.safetensors");
  EXPECT_NE(m.find("tensor \"bert.encoder.layer.1.attention.self.key.weight\" is missing (W_K of weight group 1)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tensor \"bert.encoder.layer.0.intermediate.dense.weight\" has shape [8, 12], expected [12, 8] "
                   "(intermediate_size x hidden_size"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tensor \"bert.encoder.layer.1.output.dense.bias\" has dtype I32, not a float"), std::string::npos)
      << m;
}

TEST(CheckpointWeights, ListsTheFirst20ProblemsThenACount) {
  TempDir dir;
  Tensors t = bert_tensors("");
  for (auto it = t.begin(); it != t.end();)
    it = it->first.starts_with("encoder.") ? t.erase(it) : std::next(it);  // every block tensor: 32
  write_folder(dir, config_of("bert"), t);
  const std::string m = refusal(dir, "model.safetensors");
  EXPECT_NE(m.find("... and 12 more problems"), std::string::npos) << m;
}

TEST(CheckpointWeights, RefusesAnAbsentOrAmbiguousPrefix) {
  {
    TempDir dir;
    write_folder(dir, config_of("roberta"), bert_tensors("bert."));  // BERT's weights under RoBERTa's config
    const std::string m = refusal(dir, "model.safetensors");
    EXPECT_NE(m.find("tensor \"embeddings.word_embeddings.weight\" is missing under every prefix a roberta checkpoint "
                     "may have (\"roberta.\", none)"),
              std::string::npos)
        << m;
  }
  {
    TempDir dir;
    Tensors t = bert_tensors("bert.");
    t.merge(bert_tensors(""));
    write_folder(dir, config_of("bert"), t);
    const std::string m = refusal(dir, "model.safetensors");
    EXPECT_NE(m.find("tensors \"bert.embeddings.word_embeddings.weight\" and \"embeddings.word_embeddings.weight\" are "
                     "both present"),
              std::string::npos)
        << m;
  }
}

TEST(CheckpointWeights, RefusesALayerNormStoredUnderBothNames) {
  TempDir dir;
  Tensors t = bert_tensors("");
  put(t, "encoder.layer.0.output.LayerNorm.gamma", {u(d)});
  write_folder(dir, config_of("bert"), t);
  const std::string m = refusal(dir, "model.safetensors");
  EXPECT_NE(m.find("tensors \"encoder.layer.0.output.LayerNorm.weight\" and \"encoder.layer.0.output.LayerNorm.gamma\" "
                   "are both present"),
            std::string::npos)
      << m;
}

TEST(CheckpointWeights, NamesTheIndexOfAShardedFolderForAMissingTensor) {
  TempDir dir;
  Tensors t = bert_tensors("");
  t.erase("encoder.layer.0.output.dense.bias");
  checkpoint::test::write_bytes(dir / "config.json", config_of("bert").dump());
  Writer a, b;
  std::string map;
  for (const auto& [name, x] : t) {
    const bool first = name.starts_with("embeddings.");
    (first ? a : b)
        .add(name, "F32", shape_json(x.shape),
             checkpoint::test::bytes_of(std::vector<float>(x.values.begin(), x.values.end())));
    map += (map.empty() ? "" : ",") + ("\"" + name + "\":\"" + (first ? "a.safetensors" : "b.safetensors") + "\"");
  }
  a.write(dir / "a.safetensors");
  b.write(dir / "b.safetensors");
  checkpoint::test::write_bytes(dir / "model.safetensors.index.json", "{\"weight_map\":{" + map + "}}");
  const std::string m = refusal(dir, "model.safetensors.index.json");
  EXPECT_NE(m.find("tensor \"encoder.layer.0.output.dense.bias\" is missing (b_2 of weight group 0)"),
            std::string::npos)
      << m;
  // the same folder, complete, reads across the shards
  t = bert_tensors("");
  TempDir whole;
  write_folder(whole, config_of("bert"), t);
  EXPECT_NO_THROW((void)CheckpointWeights::open(whole.path()));
}

// --- config.json -------------------------------------------------------------------------------

// The message of encoder_shape on `config`; it must name the file and `key`.
std::string shape_refusal(const nlohmann::json& config, const std::string& key) {
  const auto c = checkpoint::ModelConfig::parse(config.dump(), "m/config.json");
  const std::string m = config_error([&] { (void)encoder_shape(c); });
  EXPECT_NE(m.find("m/config.json: key \"" + key + "\" "), std::string::npos) << m;
  return m;
}

EncoderShape shape_of(const nlohmann::json& config) {
  return encoder_shape(checkpoint::ModelConfig::parse(config.dump(), "m/config.json"));
}

TEST(EncoderShape, DefaultsAndActivations) {
  EXPECT_EQ(shape_of(config_of("bert")).pad_token_id, 0);
  EXPECT_EQ(shape_of(config_of("roberta")).pad_token_id, 1);
  EXPECT_EQ(shape_of(config_of("albert")).pad_token_id, 0);
  nlohmann::json c = config_of("bert");
  c["pad_token_id"] = 3;
  c["initializer_range"] = 0.05;
  c["position_embedding_type"] = "absolute";
  c["classifier_dropout"] = nullptr;
  EXPECT_EQ(shape_of(c).pad_token_id, 3);
  EXPECT_EQ(shape_of(c).initializer_range, 0.05);
  for (const auto& [name, a] :
       std::vector<std::pair<std::string, Activation>>{{"gelu", Activation::gelu},
                                                       {"gelu_python", Activation::gelu},
                                                       {"gelu_new", Activation::gelu_tanh},
                                                       {"gelu_pytorch_tanh", Activation::gelu_tanh},
                                                       {"gelu_accurate", Activation::gelu_tanh},
                                                       {"relu", Activation::relu}}) {
    c["hidden_act"] = name;
    EXPECT_EQ(shape_of(c).activation, a) << name;
  }
  nlohmann::json a = config_of("albert");
  a["num_hidden_groups"] = 2;
  a["num_hidden_layers"] = 4;
  EXPECT_EQ(shape_of(a).hidden_groups, 2);
  EXPECT_EQ(shape_of(a).groups(), 2);
  EXPECT_EQ(shape_of(config_of("bert")).groups(), layers);
}

TEST(EncoderShape, RefusesModelTypesThatAreNotThisBlock) {
  EXPECT_NE(shape_refusal(config_of("xlnet"), "model_type").find("XLNet's two-stream attention"), std::string::npos);
  EXPECT_NE(shape_refusal(config_of("distilbert"), "model_type").find("no token-type embedding"), std::string::npos);
  EXPECT_NE(shape_refusal(config_of("gpt2"), "model_type").find("not an encoder family read here"), std::string::npos);
  nlohmann::json c = config_of("bert");
  c.erase("model_type");
  EXPECT_NE(shape_refusal(c, "model_type").find("\"model_type\": \"bert\" added"), std::string::npos);
}

TEST(EncoderShape, RefusesEachBadKeyAtOnce) {
  nlohmann::json c = config_of("bert");
  c["hidden_size"] = 8;
  c["num_attention_heads"] = 3;
  c["hidden_act"] = "gelu_fast";
  c["position_embedding_type"] = "relative_key";
  c["vocab_size"] = 100'000'000;
  c.erase("num_hidden_layers");
  c["intermediate_size"] = 0;
  c["layer_norm_eps"] = -1;
  c["type_vocab_size"] = 2.0;
  const std::string m = shape_refusal(c, "hidden_size");
  for (const char* want :
       {"key \"hidden_size\" is 8, not a multiple of num_attention_heads = 3",
        "key \"hidden_act\" is \"gelu_fast\": its tanh approximation rounds sqrt(2/pi)",
        "key \"position_embedding_type\" is \"relative_key\": relative position embeddings",
        "key \"vocab_size\" is 100000000, more than the 10000000", "key \"num_hidden_layers\" is missing",
        "key \"intermediate_size\" is 0: a size is at least 1",
        "key \"layer_norm_eps\" is -1: must be finite and positive",
        "key \"type_vocab_size\" is a JSON floating-point number, not an integer"})
    EXPECT_NE(m.find(std::string("m/config.json: ") + want), std::string::npos) << want << "\n" << m;
}

TEST(EncoderShape, RefusesEachBadKeyAlone) {
  nlohmann::json a = config_of("albert");
  a["inner_group_num"] = 2;
  EXPECT_NE(shape_refusal(a, "inner_group_num").find("is 2: a layer of such an ALBERT is inner_group_num blocks"),
            std::string::npos);
  a = config_of("albert");
  a.erase("embedding_size");
  shape_refusal(a, "embedding_size");
  nlohmann::json c = config_of("bert");
  c["hidden_act"] = "swish";
  EXPECT_NE(shape_refusal(c, "hidden_act").find("not an activation of this block"), std::string::npos);
  c = config_of("bert");
  c["hidden_act"] = "quick_gelu";
  shape_refusal(c, "hidden_act");
  c = config_of("bert");
  c["hidden_size"] = 40000;
  c["num_attention_heads"] = 1;
  EXPECT_NE(shape_refusal(c, "hidden_size").find("more than the 32768"), std::string::npos);
  c = config_of("bert");
  c["pad_token_id"] = vocab;
  EXPECT_NE(shape_refusal(c, "pad_token_id").find("outside the vocabulary of vocab_size = 20"), std::string::npos);
  c = config_of("roberta");
  c["max_position_embeddings"] = 2;  // positions start at pad_token_id + 1 = 2
  shape_refusal(c, "max_position_embeddings");
  c = config_of("bert");
  c["num_hidden_layers"] = 100001;
  shape_refusal(c, "num_hidden_layers");
  c = config_of("bert");
  c["initializer_range"] = 0;
  shape_refusal(c, "initializer_range");
}

TEST(TensorTable, EveryRoleOnceAndTheLinearWeightsMarked) {
  for (const Family f : {Family::bert, Family::roberta, Family::albert}) {
    std::vector<int> seen(role_count);
    for (const TensorEntry& e : tensor_table(f)) {
      ++seen[static_cast<std::size_t>(e.role)];
      const bool weight_matrix = e.role == Role::query || e.role == Role::key || e.role == Role::value ||
                                 e.role == Role::attention_output || e.role == Role::mlp_in ||
                                 e.role == Role::mlp_out || e.role == Role::projection;
      EXPECT_EQ(e.linear, weight_matrix) << e.name;
    }
    for (std::size_t r = 0; r < role_count; ++r) {
      const bool projection = r == static_cast<std::size_t>(Role::projection) ||
                              r == static_cast<std::size_t>(Role::projection_bias);
      EXPECT_EQ(seen[r], projection && f != Family::albert ? 0 : 1) << r;
    }
    EXPECT_EQ(tensor_prefixes(f).back(), "");
  }
  EXPECT_EQ(tensor_name("encoder.layer.{group}.output.dense.bias", 11), "encoder.layer.11.output.dense.bias");
}

}  // namespace
}  // namespace rcsweep::models::encoder
