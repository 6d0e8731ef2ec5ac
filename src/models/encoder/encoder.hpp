// The encoder blocks of the BERT family as the papers measured them (Mind the Gap Figs. 3, 8, 9,
// 11; Dong et al. Fig. 2; lambda-skip Fig. 2): BERT (arXiv:1810.04805), RoBERTa (arXiv:1907.11692),
// ALBERT (arXiv:1909.11942) and the BERT-shaped TinyBERT. A post-LN block of multi-head attention
// with biases and an output projection W_O, then a GELU MLP, each sub-block added to its
// (lambda-scaled) input and normalised by an affine LayerNorm (docs/ENCODERS.md).
//
// This header is the block's data: its shape (from a config.json), its weights as one layer's
// float64 tensors, the token inputs and the ablations. Where the weights come from is a
// WeightSource: drawn from the published initialisation (random_weights.cpp, Philox streams) or
// converted from an opened checkpoint folder (checkpoint_weights.hpp, which maps the Hugging Face
// tensor names in one table). No MPI, no file opened here.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/matrix.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models::encoder {

/// The architectures read from config.json's "model_type".
enum class Family {
  bert,     ///< BERT and BERT-shaped models (TinyBERT): absolute positions 0..T-1
  roberta,  ///< RoBERTa: positions start at pad_token_id + 1 and skip padding
  albert,   ///< ALBERT: factorised embedding (E -> d projection), layer groups shared across depth
};

/// The MLP's activation (config.json "hidden_act").
enum class Activation {
  gelu,       ///< "gelu": x Phi(x), with the error function (exact)
  gelu_tanh,  ///< "gelu_new", "gelu_pytorch_tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  relu,       ///< "relu"
};

/// The hyperparameters of an encoder (config.json's keys, Hugging Face's names in comments).
struct EncoderShape {
  Family family = Family::bert;
  int vocab = 0;                    ///< vocab_size: rows of the word embedding
  int max_positions = 0;            ///< max_position_embeddings: rows of the position embedding
  int type_vocab = 0;               ///< type_vocab_size: rows of the token-type embedding
  int d = 0;                        ///< hidden_size
  int heads = 0;                    ///< num_attention_heads (d_head = d / heads)
  int intermediate = 0;             ///< intermediate_size: MLP hidden width
  int layers = 0;                   ///< num_hidden_layers: blocks applied
  int embedding_size = 0;           ///< embedding_size (ALBERT; = d for the others)
  int hidden_groups = 1;            ///< num_hidden_groups (ALBERT): shared weight groups (group_of)
  int inner_group_num = 1;          ///< inner_group_num (ALBERT): layers per group; only 1 is supported
  int pad_token_id = 0;             ///< pad_token_id: its embedding row is zero at initialisation
  double layer_norm_eps = 1e-12;    ///< layer_norm_eps
  double initializer_range = 0.02;  ///< initializer_range: std of every weight at initialisation
  Activation activation = Activation::gelu;

  int d_head() const noexcept { return d / heads; }
  /// The weight group that block `layer` (1-based) applies: layer - 1, or ALBERT's shared group
  /// int((layer - 1) / (layers / hidden_groups)) with the divisions in double, as Hugging Face's
  /// AlbertTransformer computes it (not always ((layer - 1) hidden_groups) / layers: 18 layers in
  /// 14 groups put layer 10 in group 6, the integer formula in 7).
  int group_of(int layer) const noexcept;
  /// Number of distinct weight groups: layers, or ALBERT's hidden_groups.
  int groups() const noexcept;
  /// Position id of the first token (RoBERTa: pad_token_id + 1, else 0).
  int position_offset() const noexcept;
};

/// One affine LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta, per row (biased variance).
struct LayerNormWeights {
  std::vector<double> gamma, beta;  ///< d each
};

/// One block's weights, stored to multiply on the right (X W): Hugging Face's nn.Linear weight
/// [out, in] transposed. d x d projections with heads as column blocks of d_head.
struct BlockWeights {
  Matrix W_Q, W_K, W_V, W_O;               ///< d x d
  std::vector<double> b_Q, b_K, b_V, b_O;  ///< d each
  LayerNormWeights norm_attention;         ///< after attention (BERT's attention.output.LayerNorm)
  Matrix W_1;                              ///< d x intermediate
  std::vector<double> b_1;                 ///< intermediate
  Matrix W_2;                              ///< intermediate x d
  std::vector<double> b_2;                 ///< d
  LayerNormWeights norm_mlp;               ///< after the MLP (BERT's output.LayerNorm)
};

/// The embedding tables: a token's input row is LayerNorm(word[id] + position[pos] + type[t]),
/// then (ALBERT) times the projection plus its bias.
struct EmbeddingWeights {
  Matrix word;            ///< rows: the token ids asked for (EmbeddingRequest::ids order), embedding_size columns
  Matrix position;        ///< rows: positions 0 .. max position used, embedding_size columns
  Matrix token_type;      ///< rows: type_vocab, embedding_size columns
  LayerNormWeights norm;  ///< embedding_size each
  Matrix projection;      ///< ALBERT: embedding_size x d (empty otherwise)
  std::vector<double> projection_bias;  ///< ALBERT: d
};

/// What an embedding lookup needs: the distinct token ids used (ascending) and the largest
/// position id, so that a source converts or draws only those rows.
struct EmbeddingRequest {
  std::vector<std::int64_t> ids;
  int max_position = 0;
};

/// Where a model's weights come from. Implementations: RandomWeights (below) and
/// CheckpointWeights (checkpoint_weights.hpp). Calls may come from several threads at once.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const EncoderShape& shape() const = 0;
  virtual EmbeddingWeights embeddings(const EmbeddingRequest& request) const = 0;
  /// The weights of weight group `group` (0-based, < shape().groups()).
  virtual BlockWeights block(int group) const = 0;
};

/// The published initialisation (Hugging Face's _init_weights for BERT, RoBERTa and ALBERT):
/// every Linear and Embedding weight N(0, initializer_range^2), biases 0, LayerNorm gamma 1 and
/// beta 0, the padding row of the word embedding (and RoBERTa's position embedding) 0. Each tensor
/// is its own Philox stream keyed by (seed, draw, group, tensor), element (i, j) of a table row i
/// being stream element i * cols + j, so a row is drawn without the others and a draw never
/// depends on T, the tokens or the ablations. Bitwise reproducible.
class RandomWeights final : public WeightSource {
 public:
  RandomWeights(EncoderShape shape, std::uint64_t seed, std::uint32_t draw);
  const EncoderShape& shape() const override { return shape_; }
  EmbeddingWeights embeddings(const EmbeddingRequest& request) const override;
  BlockWeights block(int group) const override;

 private:
  EncoderShape shape_;
  std::uint64_t seed_;
  std::uint32_t draw_;
};

/// One excerpt: its token ids (T of them, padding included), token types (empty: all 0) and which
/// tokens are real (empty: all; a padded key is masked out of every attention row).
struct Excerpt {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> types;
  std::vector<bool> real;
};

/// The input X_0 (T x d) of an excerpt: LayerNorm(word + position + type) of the embedding
/// (ALBERT: then the projection to d). Position ids are offset + 0..T-1 (RoBERTa: offset + the
/// count of real tokens so far, padding at pad_token_id). Throws Error for an id outside the
/// vocabulary or a position beyond max_positions (the config checks catch these first).
Matrix embed(const EncoderShape& shape, const EmbeddingWeights& weights, const EmbeddingRequest& request,
             const Excerpt& excerpt);

/// The ablations of Dong et al. §4 and lambda-skip: a block is
///   A = norm(lambda_attention X + attention(X)),  Y = norm(lambda_mlp A + mlp(A))
/// with mlp removed (Y = A) when !mlp, norm the identity when !norm, and the attention causal
/// when causal. The published block is lambda 1, mlp, norm, not causal.
struct Ablation {
  double lambda_attention = 1.0;
  double lambda_mlp = 1.0;
  bool mlp = true;
  bool norm = true;
  bool causal = false;
};

/// What a block reports besides its output.
struct BlockOutputs {
  Matrix attention;         ///< T x d: the attention sub-block's branch, concat_h(A_h V_h) W_O + b_O
  Matrix after_attention;   ///< T x d: A, the attention sub-block's output (input of the MLP)
  Matrix head0;             ///< T x T: head 0's attention probabilities A_0 (only when asked)
  bool keep_head0 = false;  ///< set before the call
};

/// One encoder block on X (T x d) in place. `real` (empty: all tokens) masks padded keys: their
/// probability is exactly 0 in every row. `outputs` (nullable) receives the intermediate values.
void apply_block(const EncoderShape& shape, const BlockWeights& weights, const Ablation& ablation,
                 const std::vector<bool>& real, Matrix& X, BlockOutputs* outputs = nullptr);

/// Row-wise affine LayerNorm in place (biased variance, eps from the shape).
void layer_norm(const LayerNormWeights& weights, double eps, Matrix& X);

/// The activation in place.
void activate(Activation activation, std::span<double> values);

}  // namespace rcsweep::models::encoder
