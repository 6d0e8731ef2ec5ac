// The published initialisation of the BERT-family encoders (encoder.hpp, RandomWeights): Hugging
// Face's _init_weights of BertPreTrainedModel, RobertaPreTrainedModel and AlbertPreTrainedModel.
//
// Streams. Every tensor is one Philox stream (rng/philox.hpp) with the key
//   {seed, replicate = draw, T = 0, d = hidden_size, layer, tensor, head = 0},
// layer = the weight group (0-based) for a block's tensors and 0 for the embedding tables and
// ALBERT's projection (their Tensor tags differ from every block tensor's, so no two tensors share
// a stream), tensor = its rng::Tensor tag (encoder_word .. encoder_mlp_out). The stream is laid
// out on rcsweep's layout, row-major, with Linear weights stored in x out (Hugging Face's [out, in]
// transposed): entry (i, j) of a rows x cols tensor is stream element i * cols + j, scaled by
// initializer_range. So a row of a table (a token id's embedding) is drawn without the rows before
// it, and no draw depends on T, the tokens, the ablations or the other tensors.
#include "models/encoder/encoder.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace rcsweep::models::encoder {
namespace {

using rng::Tensor;

constexpr std::uint32_t embedding_layer = 0;  // the key's layer for the embedding tables

void check_shape(const EncoderShape& s) {
  const auto positive = [](const char* key, int v) {
    if (v <= 0) throw Error(std::string("RandomWeights: ") + key + " = " + std::to_string(v) + " must be positive");
  };
  positive("vocab_size", s.vocab);
  positive("max_position_embeddings", s.max_positions);
  positive("type_vocab_size", s.type_vocab);
  positive("hidden_size", s.d);
  positive("num_attention_heads", s.heads);
  positive("intermediate_size", s.intermediate);
  positive("num_hidden_layers", s.layers);
  positive("embedding_size", s.embedding_size);
  if (s.d % s.heads != 0)
    throw Error("RandomWeights: hidden_size " + std::to_string(s.d) + " is not a multiple of num_attention_heads " +
                std::to_string(s.heads));
  if (s.family != Family::albert && s.embedding_size != s.d)
    throw Error("RandomWeights: embedding_size " + std::to_string(s.embedding_size) + " differs from hidden_size " +
                std::to_string(s.d) + " (only ALBERT projects its embedding)");
  if (s.family == Family::albert && (s.hidden_groups < 1 || s.hidden_groups > s.layers))
    throw Error("RandomWeights: num_hidden_groups " + std::to_string(s.hidden_groups) + " must be in 1 .. " +
                std::to_string(s.layers));
  if (s.family == Family::albert && s.inner_group_num != 1)
    throw Error("RandomWeights: inner_group_num " + std::to_string(s.inner_group_num) + " (only 1 is supported)");
}

// `rows` x `cols` entries of a stream from element first_row * cols on, times `scale`.
Matrix normal_rows(const rng::StreamKey& key, std::size_t first_row, std::size_t rows, std::size_t cols, double scale) {
  Matrix M(rows, cols, Matrix::uninitialized);
  rng::fill_normal(key, static_cast<std::uint64_t>(first_row) * cols, M.values());
  for (double& x : M.values()) x *= scale;
  return M;
}

LayerNormWeights unit_norm(std::size_t n) { return {std::vector<double>(n, 1.0), std::vector<double>(n, 0.0)}; }

}  // namespace

RandomWeights::RandomWeights(EncoderShape shape, std::uint64_t seed, std::uint32_t draw)
    : shape_(std::move(shape)), seed_(seed), draw_(draw) {
  check_shape(shape_);
}

EmbeddingWeights RandomWeights::embeddings(const EmbeddingRequest& request) const {
  const auto E = static_cast<std::size_t>(shape_.embedding_size);
  const auto d = static_cast<std::size_t>(shape_.d);
  const double r = shape_.initializer_range;
  for (std::size_t k = 0; k < request.ids.size(); ++k) {
    const std::int64_t id = request.ids[k];
    if (id < 0 || id >= shape_.vocab)
      throw Error("RandomWeights: token id " + std::to_string(id) +
                  " is outside the vocabulary (vocab_size = " + std::to_string(shape_.vocab) + ")");
    if (k > 0 && id <= request.ids[k - 1])
      throw Error("RandomWeights: the requested token ids are not ascending and distinct (" +
                  std::to_string(request.ids[k - 1]) + " before " + std::to_string(id) + ")");
  }
  if (request.max_position < 0 || request.max_position >= shape_.max_positions)
    throw Error("RandomWeights: position " + std::to_string(request.max_position) +
                " is beyond max_position_embeddings = " + std::to_string(shape_.max_positions));
  const auto key = [&](Tensor tensor) {
    return rng::StreamKey{.seed = seed_,
                          .replicate = draw_,
                          .T = 0,
                          .d = static_cast<std::uint32_t>(shape_.d),
                          .layer = embedding_layer,
                          .tensor = tensor,
                          .head = 0};
  };
  const auto pad = static_cast<std::int64_t>(shape_.pad_token_id);

  EmbeddingWeights w;
  // The requested rows of the word embedding, each at its id's place in the stream; nn.Embedding's
  // padding_idx row is zero.
  w.word = Matrix(request.ids.size(), E, Matrix::uninitialized);
  const rng::StreamKey word = key(Tensor::encoder_word);
  for (std::size_t k = 0; k < request.ids.size(); ++k) {
    const auto row = w.word.row(k);
    const auto id = static_cast<std::uint64_t>(request.ids[k]);
    rng::fill_normal(word, id * E, row);
    for (double& x : row) x = request.ids[k] == pad ? 0.0 : x * r;
  }
  w.position = normal_rows(key(Tensor::encoder_position), 0, static_cast<std::size_t>(request.max_position) + 1, E, r);
  if (shape_.family == Family::roberta && pad >= 0 && pad <= request.max_position)  // RobertaEmbeddings' padding_idx
    std::fill(w.position.row(static_cast<std::size_t>(pad)).begin(),
              w.position.row(static_cast<std::size_t>(pad)).end(), 0.0);
  w.token_type = normal_rows(key(Tensor::encoder_token_type), 0, static_cast<std::size_t>(shape_.type_vocab), E, r);
  w.norm = unit_norm(E);
  if (shape_.family == Family::albert) {
    w.projection = normal_rows(key(Tensor::encoder_projection), 0, E, d, r);
    w.projection_bias.assign(d, 0.0);
  }
  return w;
}

BlockWeights RandomWeights::block(int group) const {
  if (group < 0 || group >= shape_.groups())
    throw Error("RandomWeights: weight group " + std::to_string(group) + " outside 0 .. " +
                std::to_string(shape_.groups() - 1));
  const auto d = static_cast<std::size_t>(shape_.d);
  const auto m = static_cast<std::size_t>(shape_.intermediate);
  const double r = shape_.initializer_range;
  const auto draw = [&](Tensor tensor, std::size_t rows, std::size_t cols) {
    const rng::StreamKey key{.seed = seed_,
                             .replicate = draw_,
                             .T = 0,
                             .d = static_cast<std::uint32_t>(shape_.d),
                             .layer = static_cast<std::uint32_t>(group),
                             .tensor = tensor,
                             .head = 0};
    return normal_rows(key, 0, rows, cols, r);
  };
  BlockWeights w;
  w.W_Q = draw(Tensor::encoder_query, d, d);
  w.W_K = draw(Tensor::encoder_key, d, d);
  w.W_V = draw(Tensor::encoder_value, d, d);
  w.W_O = draw(Tensor::encoder_output, d, d);
  w.b_Q.assign(d, 0.0);
  w.b_K.assign(d, 0.0);
  w.b_V.assign(d, 0.0);
  w.b_O.assign(d, 0.0);
  w.norm_attention = unit_norm(d);
  w.W_1 = draw(Tensor::encoder_mlp_in, d, m);
  w.b_1.assign(m, 0.0);
  w.W_2 = draw(Tensor::encoder_mlp_out, m, d);
  w.b_2.assign(d, 0.0);
  w.norm_mlp = unit_norm(d);
  return w;
}

}  // namespace rcsweep::models::encoder
