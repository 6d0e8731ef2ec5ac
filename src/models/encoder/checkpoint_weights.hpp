// A Hugging Face checkpoint of BERT, RoBERTa or ALBERT as encoder weights: config.json's keys as an
// EncoderShape, and the tensors of the folder mapped to the block's roles by ONE table per family
// (tensor_table). Every tensor the model needs is checked (present, shape, float dtype) when the
// source is built, before any work; then each call converts only what it is asked for, to float64,
// with nn.Linear weights transposed to multiply on the right (docs/CHECKPOINTS.md "Encoder
// checkpoints").
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/model_config.hpp"
#include "checkpoint/model_folder.hpp"
#include "models/encoder/encoder.hpp"

namespace rcsweep::models::encoder {

/// The EncoderShape of a config.json: "model_type" gives the family ("bert", also BERT-shaped
/// models such as TinyBERT; "roberta"; "albert"), then vocab_size, max_position_embeddings,
/// type_vocab_size, hidden_size, num_attention_heads, intermediate_size, num_hidden_layers
/// (required), embedding_size (ALBERT, required; the others: hidden_size), num_hidden_groups and
/// inner_group_num (ALBERT, default 1), pad_token_id (default: BERT 0, RoBERTa 1, ALBERT 0),
/// layer_norm_eps (1e-12), initializer_range (0.02), hidden_act (default: "gelu", ALBERT
/// "gelu_new"), position_embedding_type ("absolute" when present). Throws ConfigError naming the
/// file and each key at fault (every problem at once): a model_type that is missing or not one of
/// the three (XLNet, DistilBERT and others, with the reason), a size below 1 or above its limit
/// (hidden_size and embedding_size 32768, intermediate_size 262144, num_hidden_layers and
/// num_hidden_groups 100000, vocab_size 10^7, max_position_embeddings 10^6, type_vocab_size
/// 10^4), hidden_size not divisible by num_attention_heads, inner_group_num other than 1, a
/// pad_token_id outside the vocabulary (RoBERTa: or leaving no position after it), layer_norm_eps
/// or initializer_range not finite and positive, an activation the block does not compute exactly
/// ("gelu_fast", "quick_gelu", ...), relative position embeddings.
EncoderShape encoder_shape(const checkpoint::ModelConfig& config);

/// The part of the encoder a checkpoint tensor holds (EmbeddingWeights and BlockWeights fields).
enum class Role : std::uint8_t {
  word,                   ///< EmbeddingWeights::word, [vocab, E]
  position,               ///< EmbeddingWeights::position, [max_positions, E]
  token_type,             ///< EmbeddingWeights::token_type, [type_vocab, E]
  embedding_norm_gamma,   ///< EmbeddingWeights::norm.gamma, [E]
  embedding_norm_beta,    ///< EmbeddingWeights::norm.beta, [E]
  projection,             ///< EmbeddingWeights::projection (ALBERT), Linear [d, E]
  projection_bias,        ///< EmbeddingWeights::projection_bias (ALBERT), [d]
  query,                  ///< BlockWeights::W_Q, Linear [d, d]
  query_bias,             ///< b_Q, [d]
  key,                    ///< W_K, Linear [d, d]
  key_bias,               ///< b_K, [d]
  value,                  ///< W_V, Linear [d, d]
  value_bias,             ///< b_V, [d]
  attention_output,       ///< W_O, Linear [d, d]
  attention_output_bias,  ///< b_O, [d]
  attention_norm_gamma,   ///< norm_attention.gamma, [d]
  attention_norm_beta,    ///< norm_attention.beta, [d]
  mlp_in,                 ///< W_1, Linear [intermediate, d]
  mlp_in_bias,            ///< b_1, [intermediate]
  mlp_out,                ///< W_2, Linear [d, intermediate]
  mlp_out_bias,           ///< b_2, [d]
  mlp_norm_gamma,         ///< norm_mlp.gamma, [d]
  mlp_norm_beta,          ///< norm_mlp.beta, [d]
};
inline constexpr std::size_t role_count = 23;

/// One row of a family's table: the role and its tensor's name without the model's prefix, where
/// "{group}" stands for the weight group (the layer; ALBERT: the layer group).
struct TensorEntry {
  Role role;
  std::string_view name;
  bool linear = false;  ///< an nn.Linear weight, stored [out, in]: transposed to in x out
};

/// The table of `family`: one entry per role the family has (all but the projection; ALBERT all),
/// the embeddings' first. A LayerNorm's ".weight" and ".bias" may also be stored as ".gamma" and
/// ".beta" (older checkpoints converted from TensorFlow).
std::span<const TensorEntry> tensor_table(Family family);
/// The prefixes a checkpoint of `family` puts before every name: the model's ("bert.",
/// "roberta.", "albert.": a model with a head, such as BertForMaskedLM) or none (a saved base
/// model).
std::span<const std::string_view> tensor_prefixes(Family family);
/// `name` with "{group}" replaced by `group`.
std::string tensor_name(std::string_view name, int group);

/// The weights of an opened model folder. The folder is held by a shared_ptr, so the source keeps
/// its files mapped for as long as it lives. Thread-safe: every call is const and converts into
/// memory of its own.
class CheckpointWeights final : public WeightSource {
 public:
  /// Reads the shape (encoder_shape), finds the prefix (the word embedding under each of
  /// tensor_prefixes; none found or more than one is refused), and checks every tensor the model
  /// needs, of every group: present (exactly one of a LayerNorm's two spellings), of the shape
  /// the config gives, of a float dtype. Throws ConfigError naming the file and the tensor, every
  /// problem at once (the first 20, then a count). Tensors the table does not name (the pooler,
  /// the heads, position_ids) are ignored.
  explicit CheckpointWeights(std::shared_ptr<const checkpoint::ModelFolder> folder);
  /// ModelFolder::open(folder) and the checks above.
  static std::shared_ptr<const CheckpointWeights> open(const std::filesystem::path& folder);

  const EncoderShape& shape() const override { return shape_; }
  /// The rows of the word embedding for request.ids (in that order), positions 0 ..
  /// request.max_position, every token type, the LayerNorm, and ALBERT's projection (E x d)
  /// and bias. Only the rows asked for are converted. Throws Error for an id outside the
  /// vocabulary or a position outside the table.
  EmbeddingWeights embeddings(const EmbeddingRequest& request) const override;
  /// The tensors of weight group `group` (0 <= group < shape().groups()) as float64, the Linear
  /// weights transposed (W_Q(i, j) is the stored query.weight[j][i]). Throws Error for another
  /// group.
  BlockWeights block(int group) const override;

  const checkpoint::ModelFolder& folder() const noexcept { return *folder_; }
  /// The prefix the folder's names carry ("bert.", or "" for a saved base model).
  const std::string& prefix() const noexcept { return prefix_; }
  /// The stored name of `role`'s tensor in `group` (0 for the embeddings), as checked.
  std::string stored_name(Role role, int group = 0) const;

 private:
  Matrix linear(Role role, int group) const;
  std::vector<double> vector(Role role, int group) const;

  std::shared_ptr<const checkpoint::ModelFolder> folder_;
  EncoderShape shape_;
  std::string prefix_;
};

}  // namespace rcsweep::models::encoder
