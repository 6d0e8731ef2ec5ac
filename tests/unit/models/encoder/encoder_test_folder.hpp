// A tiny BERT checkpoint folder written from any WeightSource (RandomWeights, say): config.json from
// an EncoderShape and model.safetensors in F64 under the names of tensor_table(Family::bert)
// without a prefix, the Linear weights stored [out, in] as Hugging Face stores them. Read back by
// CheckpointWeights, the folder gives the source's weights bitwise.
#pragma once
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/encoder/checkpoint_weights.hpp"
#include "models/encoder/encoder.hpp"
#include "../../checkpoint/checkpoint_test_support.hpp"

namespace rcsweep::models::encoder::test {

using checkpoint::test::TempDir;

/// A BERT shape small enough to run in a unit test.
inline EncoderShape tiny_bert(int d = 8, int heads = 2, int layers = 3, int intermediate = 12) {
  EncoderShape s;
  s.family = Family::bert;
  s.vocab = 30;
  s.max_positions = 24;
  s.type_vocab = 2;
  s.d = d;
  s.heads = heads;
  s.intermediate = intermediate;
  s.layers = layers;
  s.embedding_size = d;
  s.pad_token_id = 0;
  s.layer_norm_eps = 1e-12;
  s.initializer_range = 0.02;
  return s;
}

inline void write_config(const std::filesystem::path& folder, const EncoderShape& s) {
  const nlohmann::json c = {{"model_type", "bert"},
                            {"vocab_size", s.vocab},
                            {"max_position_embeddings", s.max_positions},
                            {"type_vocab_size", s.type_vocab},
                            {"hidden_size", s.d},
                            {"num_attention_heads", s.heads},
                            {"intermediate_size", s.intermediate},
                            {"num_hidden_layers", s.layers},
                            {"pad_token_id", s.pad_token_id},
                            {"layer_norm_eps", s.layer_norm_eps},
                            {"initializer_range", s.initializer_range},
                            {"hidden_act", "gelu"}};
  checkpoint::test::write_bytes(folder / "config.json", c.dump());
}

/// config.json and model.safetensors (F64) holding `source`'s weights (a BERT shape).
inline void write_checkpoint(const std::filesystem::path& folder, const WeightSource& source) {
  const EncoderShape& s = source.shape();
  write_config(folder, s);
  EmbeddingRequest all{.ids = {}, .max_position = s.max_positions - 1};
  for (int id = 0; id < s.vocab; ++id) all.ids.push_back(id);
  const EmbeddingWeights e = source.embeddings(all);
  checkpoint::test::Writer w;
  const auto add = [&w](const std::string& name, const std::vector<std::size_t>& shape, std::vector<double> v) {
    std::string dims = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? "," : "") + std::to_string(shape[i]);
    w.add(name, "F64", dims + "]", checkpoint::test::bytes_of(v));
  };
  const auto matrix = [&](const std::string& name, const Matrix& M, bool linear) {
    std::vector<double> v;
    if (linear) {  // stored [out, in]: the transpose of M (in x out)
      for (std::size_t j = 0; j < M.cols(); ++j)
        for (std::size_t i = 0; i < M.rows(); ++i) v.push_back(M(i, j));
      add(name, {M.cols(), M.rows()}, v);
    } else {
      add(name, {M.rows(), M.cols()}, {M.values().begin(), M.values().end()});
    }
  };
  std::vector<BlockWeights> blocks;
  for (int g = 0; g < s.groups(); ++g) blocks.push_back(source.block(g));
  const BlockWeights none;
  for (const TensorEntry& t : tensor_table(Family::bert)) {
    const std::string name(t.name);
    const bool per_group = name.find("{group}") != std::string::npos;
    for (int g = 0; g < (per_group ? s.groups() : 1); ++g) {
      const std::string n = tensor_name(t.name, g);
      const BlockWeights& b = per_group ? blocks[static_cast<std::size_t>(g)] : none;
      switch (t.role) {
        case Role::word: matrix(n, e.word, false); break;
        case Role::position: matrix(n, e.position, false); break;
        case Role::token_type: matrix(n, e.token_type, false); break;
        case Role::embedding_norm_gamma: add(n, {e.norm.gamma.size()}, e.norm.gamma); break;
        case Role::embedding_norm_beta: add(n, {e.norm.beta.size()}, e.norm.beta); break;
        case Role::query: matrix(n, b.W_Q, true); break;
        case Role::query_bias: add(n, {b.b_Q.size()}, b.b_Q); break;
        case Role::key: matrix(n, b.W_K, true); break;
        case Role::key_bias: add(n, {b.b_K.size()}, b.b_K); break;
        case Role::value: matrix(n, b.W_V, true); break;
        case Role::value_bias: add(n, {b.b_V.size()}, b.b_V); break;
        case Role::attention_output: matrix(n, b.W_O, true); break;
        case Role::attention_output_bias: add(n, {b.b_O.size()}, b.b_O); break;
        case Role::attention_norm_gamma: add(n, {b.norm_attention.gamma.size()}, b.norm_attention.gamma); break;
        case Role::attention_norm_beta: add(n, {b.norm_attention.beta.size()}, b.norm_attention.beta); break;
        case Role::mlp_in: matrix(n, b.W_1, true); break;
        case Role::mlp_in_bias: add(n, {b.b_1.size()}, b.b_1); break;
        case Role::mlp_out: matrix(n, b.W_2, true); break;
        case Role::mlp_out_bias: add(n, {b.b_2.size()}, b.b_2); break;
        case Role::mlp_norm_gamma: add(n, {b.norm_mlp.gamma.size()}, b.norm_mlp.gamma); break;
        case Role::mlp_norm_beta: add(n, {b.norm_mlp.beta.size()}, b.norm_mlp.beta); break;
        default: break;  // the projection: ALBERT only
      }
    }
  }
  w.write(folder / "model.safetensors");
}

}  // namespace rcsweep::models::encoder::test
