#include "models/encoder/encoder_task.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "models/layer.hpp"

namespace rcsweep::models::encoder {

Ablation ablation_of(const config::ModelParams& m, int layer) {
  double lambda = m.lambda, lambda_mlp = m.lambda_mlp;
  if (m.lambda_layers) {
    if (layer < 1 || static_cast<std::size_t>(layer) > m.lambda_layers->size())
      throw Error("encoder block " + std::to_string(layer) + ": lambda_layers has " +
                  std::to_string(m.lambda_layers->size()) + " values, none for this layer");
    lambda = (*m.lambda_layers)[static_cast<std::size_t>(layer - 1)];
    if (m.lambda_mlp_is_lambda) lambda_mlp = lambda;  // "lambda_mlp follows lambda", layer by layer
  }
  return {.lambda_attention = lambda,
          .lambda_mlp = lambda_mlp,
          .mlp = m.mlp == config::Mlp::model,
          .norm = m.norm == config::Norm::layernorm,
          .causal = m.mask == config::Mask::causal};
}

int group_at(const EncoderShape& shape, int layer) noexcept {
  const int group = shape.group_of(layer);
  return shape.family == Family::albert ? std::min(group, shape.groups() - 1) : group;
}

TaskEncoder::TaskEncoder(const config::ModelParams& model, std::uint64_t seed, int replicate)
    : model_(&model), replicate_(replicate), seed_(seed), draw_(draw_of(model, replicate)) {
  if (model.block != config::Block::encoder) throw Error("TaskEncoder: the model's block is not \"encoder\"");
  if (model.model_folder.empty()) throw Error("TaskEncoder: an encoder model without a model folder");
  if (model.lambda_layers && model.lambda_layers->size() != static_cast<std::size_t>(model.depth))
    throw Error("TaskEncoder: lambda_layers has " + std::to_string(model.lambda_layers->size()) + " values for depth " +
                std::to_string(model.depth));
  const bool checkpoint = model.init == config::Init::checkpoint;
  loaded_ = open_model(model.model_folder, checkpoint);
  if (checkpoint && !loaded_->weights) throw Error("TaskEncoder: open_model gave no weights");
  if (!checkpoint) random_ = std::make_unique<const RandomWeights>(loaded_->shape, seed, draw_);
  // The folder, the init and the draw determine the weights (the seed and the shape are the
  // bundle's and the folder's).
  name_ = "encoder " + model.model_folder + (checkpoint ? " checkpoint" : " random draw " + std::to_string(draw_));
}

const WeightSource& TaskEncoder::source() const {
  if (random_) return *random_;
  return *loaded_->weights;
}

std::string TaskEncoder::input_key() const {
  if (model_->input == config::InputKind::tokens) return "tokens " + name_;
  return "input " + std::to_string(static_cast<int>(model_->input));
}

Matrix TaskEncoder::input(RandomSource& random) const {
  if (model_->input != config::InputKind::tokens) return make_input(*model_, random);
  const std::span<const std::int64_t> ids = excerpt_ids(*model_, replicate_);
  Excerpt excerpt;
  excerpt.ids.assign(ids.begin(), ids.end());
  const std::set<std::int64_t> distinct(excerpt.ids.begin(), excerpt.ids.end());
  EmbeddingRequest request{.ids = {distinct.begin(), distinct.end()},
                           .max_position = shape().position_offset() + model_->T - 1};
  return embed(shape(), source().embeddings(request), request, excerpt);
}

const BlockWeights& TaskEncoder::block(int layer, RandomSource& random) const {
  const int group = group_at(shape(), layer);
  const std::string name = name_ + " group " + std::to_string(group);
  const auto make = [&] {
    if (random_ && group >= random_->shape().groups()) {  // BERT beyond num_hidden_layers: a fresh draw
      EncoderShape deeper = random_->shape();
      deeper.layers = group + 1;
      return RandomWeights(deeper, seed_, draw_).block(group);
    }
    return source().block(group);
  };
  // ALBERT's layer group serves every layer: drawn or converted once for the bundle, not per layer
  if (shape().family == Family::albert) return random.kept<BlockWeights>(name, make);
  return random.derived<BlockWeights>(layer, name, 0, make);
}

void TaskEncoder::apply(int layer, RandomSource& random, Matrix& X, BlockOutputs& outputs) const {
  apply_block(shape(), block(layer, random), ablation(layer), {}, X, &outputs);
}

}  // namespace rcsweep::models::encoder
