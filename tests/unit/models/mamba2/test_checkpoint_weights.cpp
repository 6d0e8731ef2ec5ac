// Mamba-2's CheckpointWeights and mamba2_shape: tiny mamba_ssm folders (d_model 8, expand 2, 4 heads
// of 4 channels, 2 groups of d_state 3, d_conv 4, 2 layers, vocab 20 padded to 24) written tensor by
// tensor under the names spelt out here, read back exactly (Linear weights transposed, the
// convolution as d_conv x conv_dim, only the asked rows of the embedding; F32, F64, F16, BF16), and
// every refusal naming its file and tensor or key.
#include "models/mamba2/checkpoint_weights.hpp"

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

namespace rcsweep::models::mamba2 {
namespace {

using checkpoint::test::config_error;
using checkpoint::test::TempDir;
using checkpoint::test::Writer;

constexpr int d = 8, E = 16, H = 4, G = 2, N = 3, K = 4, layers = 2, vocab = 20, rows = 24;
constexpr int conv_dim = E + 2 * G * N, in_proj = 2 * E + 2 * G * N + H;

// A dyadic value exact in F32, F16 and BF16 (at most 6 significant bits): tensor k, element i.
// Element (r, c) of an [n, m] tensor differs from element (c, r) (61 is prime).
double value(int k, std::size_t i) { return static_cast<double>(static_cast<int>((k * 7 + i * 13) % 61) - 30) / 8.0; }

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

struct Tensor {
  std::vector<std::size_t> shape;
  std::vector<double> values;
};
using Tensors = std::map<std::string, Tensor>;

std::size_t u(int v) { return static_cast<std::size_t>(v); }

void put(Tensors& t, const std::string& name, std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  const int k = static_cast<int>(t.size()) + 1;
  Tensor x{std::move(shape), {}};
  for (std::size_t i = 0; i < n; ++i) x.values.push_back(value(k, i));
  t[name] = std::move(x);
}

// MambaLMHeadModel's state_dict, as mamba_ssm names it (biases when `bias`; D per head).
Tensors mamba2_tensors(bool bias) {
  Tensors t;
  put(t, "backbone.embedding.weight", {u(rows), u(d)});
  put(t, "backbone.norm_f.weight", {u(d)});
  for (int l = 0; l < layers; ++l) {
    const std::string L = "backbone.layers." + std::to_string(l) + ".";
    put(t, L + "norm.weight", {u(d)});
    put(t, L + "mixer.in_proj.weight", {u(in_proj), u(d)});
    put(t, L + "mixer.conv1d.weight", {u(conv_dim), 1, u(K)});
    put(t, L + "mixer.conv1d.bias", {u(conv_dim)});
    put(t, L + "mixer.dt_bias", {u(H)});
    put(t, L + "mixer.A_log", {u(H)});
    put(t, L + "mixer.D", {u(H)});
    put(t, L + "mixer.norm.weight", {u(E)});
    put(t, L + "mixer.out_proj.weight", {u(d), u(E)});
    if (bias) {
      put(t, L + "mixer.in_proj.bias", {u(in_proj)});
      put(t, L + "mixer.out_proj.bias", {u(d)});
    }
  }
  return t;
}

nlohmann::json config_of(bool bias = false) {
  nlohmann::json ssm = {{"layer", "Mamba2"}, {"d_state", N}, {"d_conv", K},
                        {"expand", 2},       {"headdim", 4}, {"ngroups", G}};
  if (bias) ssm["bias"] = true;
  return {{"d_model", d},
          {"d_intermediate", 0},
          {"n_layer", layers},
          {"vocab_size", vocab},
          {"ssm_cfg", ssm},
          {"attn_layer_idx", nlohmann::json::array()},
          {"attn_cfg", nlohmann::json::object()},
          {"rms_norm", true},
          {"residual_in_fp32", true},
          {"fused_add_norm", true},
          {"pad_vocab_size_multiple", 8},
          {"tie_embeddings", true}};
}

std::string shape_json(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string bytes(const Tensor& t, const std::string& dtype) {
  if (dtype == "F64") return checkpoint::test::bytes_of(t.values);
  if (dtype == "F32") return checkpoint::test::bytes_of(std::vector<float>(t.values.begin(), t.values.end()));
  std::vector<std::uint16_t> v;
  for (double x : t.values) v.push_back(dtype == "F16" ? half_bits(x) : bfloat16_bits(x));
  return checkpoint::test::bytes_of(v);
}

// config.json and model.safetensors (every tensor in `dtype`, plus the tied lm_head.weight, which
// the model does not read).
void write_folder(const TempDir& dir, const nlohmann::json& config, const Tensors& tensors,
                  const std::string& dtype = "F32") {
  checkpoint::test::write_bytes(dir / "config.json", config.dump());
  Writer w;
  w.add("lm_head.weight", "I8", "[2]", std::string(2, '\0'));
  for (const auto& [name, t] : tensors) w.add(name, dtype, shape_json(t.shape), bytes(t, dtype));
  w.write(dir / "model.safetensors");
}

void expect_transposed(const Matrix& W, const Tensor& stored, const std::string& name) {
  ASSERT_EQ(stored.shape.size(), 2u) << name;
  ASSERT_EQ(W.rows(), stored.shape[1]) << name;
  ASSERT_EQ(W.cols(), stored.shape[0]) << name;
  for (std::size_t i = 0; i < W.rows(); ++i)
    for (std::size_t j = 0; j < W.cols(); ++j) ASSERT_EQ(W(i, j), stored.values[j * W.rows() + i]) << name;
}

// Every field of layer(l) against the stored tensors of layer l.
void expect_layer(const CheckpointWeights& w, const Tensors& t, int l, bool bias) {
  const LayerWeights x = w.layer(l);
  const std::string L = "backbone.layers." + std::to_string(l) + ".";
  const auto at = [&](const std::string& n) -> const Tensor& { return t.at(L + n); };
  EXPECT_EQ(x.norm, at("norm.weight").values);
  expect_transposed(x.W_in, at("mixer.in_proj.weight"), "in_proj");
  EXPECT_EQ(x.W_in.rows(), u(d));
  EXPECT_EQ(x.W_in.cols(), u(in_proj));
  ASSERT_EQ(x.conv.rows(), u(K));
  ASSERT_EQ(x.conv.cols(), u(conv_dim));
  for (std::size_t c = 0; c < u(conv_dim); ++c)
    for (std::size_t k = 0; k < u(K); ++k)
      ASSERT_EQ(x.conv(k, c), at("mixer.conv1d.weight").values[c * K + k]) << c << " " << k;
  EXPECT_EQ(x.conv_bias, at("mixer.conv1d.bias").values);
  EXPECT_EQ(x.dt_bias, at("mixer.dt_bias").values);
  EXPECT_EQ(x.A_log, at("mixer.A_log").values);
  EXPECT_EQ(x.D, at("mixer.D").values);
  EXPECT_EQ(x.gated_norm, at("mixer.norm.weight").values);
  expect_transposed(x.W_out, at("mixer.out_proj.weight"), "out_proj");
  if (bias) {
    EXPECT_EQ(x.b_in, at("mixer.in_proj.bias").values);
    EXPECT_EQ(x.b_out, at("mixer.out_proj.bias").values);
  } else {
    EXPECT_TRUE(x.b_in.empty());
    EXPECT_TRUE(x.b_out.empty());
  }
}

void expect_embedding(const CheckpointWeights& w, const Tensors& t) {
  const std::vector<std::int64_t> ids{23, 0, 7, 7, 19};  // 23: a padding row (vocab 20, rows 24)
  const Matrix X = w.embedding(ids);
  const Tensor& table = t.at("backbone.embedding.weight");
  ASSERT_EQ(X.rows(), ids.size());
  ASSERT_EQ(X.cols(), u(d));
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (std::size_t c = 0; c < u(d); ++c)
      EXPECT_EQ(X(r, c), table.values[static_cast<std::size_t>(ids[r]) * d + c]) << r << " " << c;
  EXPECT_EQ(w.final_norm(), t.at("backbone.norm_f.weight").values);
}

std::shared_ptr<const checkpoint::ModelFolder> folder(const TempDir& dir) {
  return std::make_shared<const checkpoint::ModelFolder>(checkpoint::ModelFolder::open(dir.path()));
}

TEST(Mamba2CheckpointWeights, ReadsEveryTensorInF32) {
  TempDir dir;
  const Tensors t = mamba2_tensors(false);
  write_folder(dir, config_of(), t);
  const CheckpointWeights w(folder(dir));
  const Mamba2Shape& s = w.shape();
  EXPECT_EQ(s.d_model, d);
  EXPECT_EQ(s.layers, layers);
  EXPECT_EQ(s.vocab, vocab);
  EXPECT_EQ(s.vocab_rows, rows);
  EXPECT_EQ(s.d_state, N);
  EXPECT_EQ(s.d_conv, K);
  EXPECT_EQ(s.headdim, 4);
  EXPECT_EQ(s.ngroups, G);
  EXPECT_EQ(s.heads(), H);
  EXPECT_EQ(s.d_in_proj(), in_proj);
  EXPECT_EQ(s.conv_dim(), conv_dim);
  EXPECT_FALSE(s.bias);
  for (int l = 0; l < layers; ++l) expect_layer(w, t, l, false);
  expect_embedding(w, t);
}

TEST(Mamba2CheckpointWeights, ConvertsF64F16AndBF16Exactly) {
  for (const char* dtype : {"F64", "F16", "BF16"}) {
    TempDir dir;
    const Tensors t = mamba2_tensors(true);
    write_folder(dir, config_of(true), t, dtype);
    const auto w = CheckpointWeights::open(dir.path());
    EXPECT_TRUE(w->shape().bias) << dtype;
    for (int l = 0; l < layers; ++l) expect_layer(*w, t, l, true);
    expect_embedding(*w, t);
  }
}

TEST(Mamba2CheckpointWeights, SwitchedOffTensorsAndDPerChannel) {
  TempDir dir;
  Tensors t = mamba2_tensors(false);
  nlohmann::json c = config_of();
  c["ssm_cfg"]["conv_bias"] = false;
  c["ssm_cfg"]["rmsnorm"] = false;
  c["ssm_cfg"]["D_has_hdim"] = true;
  for (int l = 0; l < layers; ++l) {
    const std::string L = "backbone.layers." + std::to_string(l) + ".mixer.";
    t.erase(L + "conv1d.bias");
    t.erase(L + "norm.weight");
    put(t, L + "D", {u(E)});
  }
  write_folder(dir, c, t, "BF16");
  const CheckpointWeights w(folder(dir));
  const LayerWeights x = w.layer(1);
  EXPECT_TRUE(x.conv_bias.empty());
  EXPECT_TRUE(x.gated_norm.empty());
  EXPECT_EQ(x.D, t.at("backbone.layers.1.mixer.D").values);
  EXPECT_EQ(x.D.size(), u(E));
}

TEST(Mamba2CheckpointWeights, LayersFromManyThreadsAtOnce) {
  TempDir dir;
  write_folder(dir, config_of(), mamba2_tensors(false), "BF16");
  const CheckpointWeights w(folder(dir));
  const LayerWeights want = w.layer(1);
  std::vector<LayerWeights> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = w.layer(1); });
  for (std::thread& th : threads) th.join();
  for (const LayerWeights& x : got) {
    EXPECT_EQ(x.W_in, want.W_in);
    EXPECT_EQ(x.conv, want.conv);
    EXPECT_EQ(x.W_out, want.W_out);
    EXPECT_EQ(x.A_log, want.A_log);
  }
}

TEST(Mamba2CheckpointWeights, RefusesIdsAndLayersOutsideTheModel) {
  TempDir dir;
  write_folder(dir, config_of(), mamba2_tensors(false));
  const CheckpointWeights w(folder(dir));
  EXPECT_THROW((void)w.embedding(std::vector<std::int64_t>{rows}), Error);
  EXPECT_THROW((void)w.embedding(std::vector<std::int64_t>{-1}), Error);
  EXPECT_THROW((void)w.layer(layers), Error);
  EXPECT_THROW((void)w.layer(-1), Error);
}

// The message of building the weights of `dir`; it must name `file`.
std::string refusal(const TempDir& dir, const std::string& file) {
  const std::string m = config_error([&] { (void)CheckpointWeights::open(dir.path()); });
  EXPECT_NE(m.find((dir / file).string() + ": "), std::string::npos) << m;
  return m;
}

TEST(Mamba2CheckpointWeights, RefusesMissingMisshapedIntegerAndSwitchedOffTensorsAllAtOnce) {
  TempDir dir;
  Tensors t = mamba2_tensors(false);
  t.erase("backbone.layers.1.mixer.A_log");
  t["backbone.layers.0.mixer.in_proj.weight"].shape = {u(d), u(in_proj)};  // stored the other way round
  t["backbone.layers.1.mixer.conv1d.weight"].shape = {u(conv_dim), u(K)};  // without the 1
  put(t, "backbone.layers.0.mixer.out_proj.bias", {u(d)});                 // bias is false
  const std::string dt = "backbone.layers.0.mixer.dt_bias";
  t.erase(dt);
  checkpoint::test::write_bytes(dir / "config.json", config_of().dump());
  Writer w;
  for (const auto& [name, x] : t) w.add(name, "F32", shape_json(x.shape), bytes(x, "F32"));
  w.add(dt, "I32", "[4]", std::string(16, '\0'));  // an integer dt_bias
  w.write(dir / "model.safetensors");

  const std::string m = refusal(dir, "model.safetensors");
  for (const char* want :
       {"tensor \"backbone.layers.1.mixer.A_log\" is missing (A_log of layer 1)",
        "tensor \"backbone.layers.0.mixer.in_proj.weight\" has shape [8, 48], expected [48, 8] (2 d_inner + 2 "
        "ngroups d_state + nheads x d_model of config.json; in_proj (W_in) of layer 0)",
        "tensor \"backbone.layers.1.mixer.conv1d.weight\" has shape [28, 4], expected [28, 1, 4]",
        "tensor \"backbone.layers.0.mixer.out_proj.bias\" is present, but ssm_cfg.bias is false in config.json",
        "tensor \"backbone.layers.0.mixer.dt_bias\" has dtype I32, not a float"})
    EXPECT_NE(m.find(want), std::string::npos) << want << "\n" << m;
}

TEST(Mamba2CheckpointWeights, ATooLargeVocabularyOrTooManyLayersShowInTheShapes) {
  TempDir dir;
  nlohmann::json c = config_of();
  c["pad_vocab_size_multiple"] = 16;  // 32 rows, the file has 24
  c["n_layer"] = 12;                  // 10 layers missing: 90 tensors
  write_folder(dir, c, mamba2_tensors(false));
  const std::string m = refusal(dir, "model.safetensors");
  EXPECT_NE(m.find("tensor \"backbone.embedding.weight\" has shape [24, 8], expected [32, 8] (vocab_size rounded up "
                   "to pad_vocab_size_multiple x d_model"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tensor \"backbone.layers.2.norm.weight\" is missing"), std::string::npos) << m;
  EXPECT_NE(m.find("... and 71 more problems"), std::string::npos) << m;  // 1 + 90 problems, 20 listed
}

TEST(Mamba2CheckpointWeights, ReadsAShardedFolderAndNamesItsIndexForAMissingTensor) {
  Tensors t = mamba2_tensors(false);
  const auto write_sharded = [&](const TempDir& dir) {
    checkpoint::test::write_bytes(dir / "config.json", config_of().dump());
    Writer a, b;
    std::string map;
    for (const auto& [name, x] : t) {
      const bool first = !name.starts_with("backbone.layers.1.");
      (first ? a : b).add(name, "F32", shape_json(x.shape), bytes(x, "F32"));
      map += (map.empty() ? "" : ",") + ("\"" + name + "\":\"" + (first ? "a.safetensors" : "b.safetensors") + "\"");
    }
    a.write(dir / "a.safetensors");
    b.write(dir / "b.safetensors");
    checkpoint::test::write_bytes(dir / "model.safetensors.index.json", "{\"weight_map\":{" + map + "}}");
  };
  TempDir whole;
  write_sharded(whole);
  const auto w = CheckpointWeights::open(whole.path());
  for (int l = 0; l < layers; ++l) expect_layer(*w, t, l, false);
  expect_embedding(*w, t);

  t.erase("backbone.layers.1.mixer.D");
  TempDir broken;
  write_sharded(broken);
  const std::string m = refusal(broken, "model.safetensors.index.json");
  EXPECT_NE(m.find("tensor \"backbone.layers.1.mixer.D\" is missing (D of layer 1)"), std::string::npos) << m;
}

// --- config.json -------------------------------------------------------------------------------

Mamba2Shape shape_of(const nlohmann::json& config) {
  return mamba2_shape(checkpoint::ModelConfig::parse(config.dump(), "m/config.json"));
}

// The message of mamba2_shape on `config`; it must name the file and `key`.
std::string shape_refusal(const nlohmann::json& config, const std::string& key) {
  const auto c = checkpoint::ModelConfig::parse(config.dump(), "m/config.json");
  const std::string m = config_error([&] { (void)mamba2_shape(c); });
  EXPECT_NE(m.find("m/config.json: key \"" + key + "\" "), std::string::npos) << m;
  return m;
}

// jobs/examples/mamba2/mamba2-130m/config.json: the published hyperparameters, Mamba2's defaults.
TEST(Mamba2Shape, ThePublishedConfigTakesMamba2sDefaults) {
  const Mamba2Shape s = shape_of(nlohmann::json::parse(R"({
    "d_model": 768, "d_intermediate": 0, "n_layer": 24, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"},
    "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true, "residual_in_fp32": true, "fused_add_norm": true,
    "pad_vocab_size_multiple": 16, "tie_embeddings": true})"));
  EXPECT_EQ(s.d_model, 768);
  EXPECT_EQ(s.layers, 24);
  EXPECT_EQ(s.vocab, 50277);
  EXPECT_EQ(s.vocab_rows, 50288);
  EXPECT_EQ(s.d_state, 128);
  EXPECT_EQ(s.d_conv, 4);
  EXPECT_EQ(s.expand, 2);
  EXPECT_EQ(s.headdim, 64);
  EXPECT_EQ(s.ngroups, 1);
  EXPECT_EQ(s.chunk_size, 256);
  EXPECT_EQ(s.heads(), 24);
  EXPECT_EQ(s.d_in_proj(), 2 * 1536 + 2 * 128 + 24);
  EXPECT_TRUE(s.rmsnorm);
  EXPECT_FALSE(s.norm_before_gate);
  EXPECT_FALSE(s.D_has_hdim);
  EXPECT_FALSE(s.bias);
  EXPECT_TRUE(s.conv_bias);
  EXPECT_EQ(s.dt_limit_low, 0.0);
  EXPECT_EQ(s.dt_limit_high, std::numeric_limits<double>::infinity());
  EXPECT_EQ(s.A_init_low, 1.0);
  EXPECT_EQ(s.A_init_high, 16.0);
  EXPECT_EQ(s.dt_min, 0.001);
  EXPECT_EQ(s.dt_max, 0.1);
  EXPECT_EQ(s.dt_init_floor, 1e-4);
  EXPECT_EQ(s.conv_init, 0.0);
  EXPECT_EQ(s.norm_eps, 1e-5);
  // MambaConfig's own defaults: pad_vocab_size_multiple 8, the other top-level keys optional
  const Mamba2Shape m = shape_of(
      {{"d_model", 64}, {"n_layer", 2}, {"vocab_size", 50}, {"ssm_cfg", {{"layer", "Mamba2"}}}});
  EXPECT_EQ(m.vocab_rows, 56);
}

TEST(Mamba2Shape, ReadsEverySsmCfgKey) {
  nlohmann::json c = config_of();
  c["ssm_cfg"].update({{"chunk_size", 64},
                       {"A_init_range", {2, 4}},
                       {"dt_min", 0.01},
                       {"dt_max", 0.2},
                       {"dt_init_floor", 0.02},
                       {"dt_limit", {0.001, 5}},
                       {"conv_init", 0.3},
                       {"rmsnorm", false},
                       {"norm_before_gate", true},
                       {"D_has_hdim", true},
                       {"bias", true},
                       {"conv_bias", false},
                       {"d_ssm", 16},
                       {"use_mem_eff_path", false}});
  c["attn_layer_idx"] = nullptr;  // null counts as missing
  const Mamba2Shape s = shape_of(c);
  EXPECT_EQ(s.chunk_size, 64);
  EXPECT_EQ(s.A_init_low, 2.0);
  EXPECT_EQ(s.A_init_high, 4.0);
  EXPECT_EQ(s.dt_min, 0.01);
  EXPECT_EQ(s.dt_max, 0.2);
  EXPECT_EQ(s.dt_init_floor, 0.02);
  EXPECT_EQ(s.dt_limit_low, 0.001);
  EXPECT_EQ(s.dt_limit_high, 5.0);
  EXPECT_EQ(s.conv_init, 0.3);
  EXPECT_FALSE(s.rmsnorm);
  EXPECT_TRUE(s.norm_before_gate);
  EXPECT_TRUE(s.D_has_hdim);
  EXPECT_TRUE(s.bias);
  EXPECT_FALSE(s.conv_bias);
}

TEST(Mamba2Shape, RefusesTransformersLayout) {
  const nlohmann::json c = {{"model_type", "mamba2"}, {"hidden_size", 768}, {"num_hidden_layers", 24}};
  EXPECT_NE(shape_refusal(c, "model_type").find("Hugging Face transformers' config layout"), std::string::npos);
  nlohmann::json with = config_of();  // a model_type beside mamba_ssm's keys is ignored
  with["model_type"] = "mamba2";
  EXPECT_EQ(shape_of(with).d_model, d);
}

TEST(Mamba2Shape, RefusesEachBadKeyAtOnce) {
  nlohmann::json c = config_of();
  c.erase("vocab_size");
  c["d_model"] = 40000;
  c["n_layer"] = 0;
  c["d_intermediate"] = 128;
  c["attn_layer_idx"] = {1};
  c["rms_norm"] = false;
  c["pad_vocab_size_multiple"] = 8.0;
  c["ssm_cfg"].update({{"layer", "Mamba1"},
                       {"d_stat", 8},
                       {"d_state", "16"},
                       {"A_init_range", {16, 1}},
                       {"dt_min", 0.5},
                       {"dt_limit", {1}},
                       {"conv_init", 0},
                       {"bias", 1}});
  const std::string m = shape_refusal(c, "d_model");
  for (const char* want :
       {"key \"vocab_size\" is missing", "key \"d_model\" is 40000, more than the 32768",
        "key \"n_layer\" is 0: a size is at least 1", "key \"d_intermediate\" is 128: blocks with an MLP",
        "key \"attn_layer_idx\" is [1]: hybrid models with attention layers",
        "key \"rms_norm\" is false: LayerNorm models",
        "key \"pad_vocab_size_multiple\" is a JSON floating-point number, not an integer",
        "key \"ssm_cfg.layer\" is \"Mamba1\": only \"Mamba2\" is read",
        "key \"ssm_cfg.d_stat\" is not an argument of mamba_ssm's Mamba2",
        "key \"ssm_cfg.d_state\" is a JSON string, not an integer",
        "key \"ssm_cfg.A_init_range\" is [16, 1]: needs 0 < low <= high",
        "key \"ssm_cfg.dt_min\" is 0.5 with dt_max 0.1: needs 0 < dt_min <= dt_max",
        "key \"ssm_cfg.dt_limit\" is [1], not two numbers", "key \"ssm_cfg.conv_init\" is 0: the bound",
        "key \"ssm_cfg.bias\" is a JSON number, not true or false"})
    EXPECT_NE(m.find(std::string("m/config.json: ") + want), std::string::npos) << want << "\n" << m;
}

TEST(Mamba2Shape, RefusesEachBadKeyAlone) {
  nlohmann::json c = config_of();
  c.erase("ssm_cfg");
  EXPECT_NE(shape_refusal(c, "ssm_cfg").find("Mamba-1"), std::string::npos);
  c = config_of();
  c["ssm_cfg"] = "Mamba2";
  EXPECT_NE(shape_refusal(c, "ssm_cfg").find("not an object"), std::string::npos);
  c = config_of();
  c["ssm_cfg"].erase("layer");
  EXPECT_NE(shape_refusal(c, "ssm_cfg.layer").find("is missing: mamba_ssm then builds a Mamba-1 layer"),
            std::string::npos);
  c = config_of();
  c["ssm_cfg"]["headdim"] = 6;  // d_inner 16
  EXPECT_NE(shape_refusal(c, "ssm_cfg.headdim").find("does not divide d_inner = expand * d_model = 16"),
            std::string::npos);
  c = config_of();
  c["ssm_cfg"]["ngroups"] = 3;  // 4 heads
  EXPECT_NE(shape_refusal(c, "ssm_cfg.ngroups").find("does not divide the 4 heads"), std::string::npos);
  c = config_of();
  c["ssm_cfg"]["d_ssm"] = 8;
  EXPECT_NE(shape_refusal(c, "ssm_cfg.d_ssm").find("not d_inner = expand * d_model = 16"), std::string::npos);
  c = config_of();
  c["ssm_cfg"]["dt_limit"] = {0.5, 0.1};
  shape_refusal(c, "ssm_cfg.dt_limit");
  c = config_of();
  c["ssm_cfg"]["dt_init_floor"] = -1e-4;
  shape_refusal(c, "ssm_cfg.dt_init_floor");
  c = config_of();
  c["ssm_cfg"]["expand"] = 65;
  shape_refusal(c, "ssm_cfg.expand");
  c = config_of();
  c["vocab_size"] = 10'000'001;
  shape_refusal(c, "vocab_size");
  c = config_of();
  c["attn_layer_idx"] = "none";
  shape_refusal(c, "attn_layer_idx");
}

TEST(TensorTable, EveryRoleOnceWithItsStoredShape) {
  const auto table = tensor_table();
  ASSERT_EQ(table.size(), role_count);
  for (std::size_t r = 0; r < role_count; ++r) EXPECT_EQ(static_cast<std::size_t>(table[r].role), r);
  EXPECT_EQ(tensor_name("backbone.layers.{layer}.mixer.A_log", 11), "backbone.layers.11.mixer.A_log");
  const Mamba2Shape s = shape_of(config_of());
  EXPECT_EQ(stored_shape(s, Role::conv), (std::vector<std::size_t>{u(conv_dim), 1, u(K)}));
  EXPECT_EQ(stored_shape(s, Role::in_proj), (std::vector<std::size_t>{u(in_proj), u(d)}));
  EXPECT_EQ(stored_shape(s, Role::out_proj), (std::vector<std::size_t>{u(d), u(E)}));
  EXPECT_EQ(stored_shape(s, Role::D), (std::vector<std::size_t>{u(H)}));
  EXPECT_FALSE(has_role(s, Role::in_proj_bias));
  EXPECT_TRUE(has_role(s, Role::conv_bias));
}

}  // namespace
}  // namespace rcsweep::models::mamba2
