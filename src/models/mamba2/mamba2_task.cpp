#include "models/mamba2/mamba2_task.hpp"

#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "models/layer.hpp"

namespace rcsweep::models::mamba2 {

Ablation ablation_of(const config::ModelParams& m, int layer) {
  double lambda = m.lambda;
  if (m.lambda_layers) {
    if (layer < 1 || static_cast<std::size_t>(layer) > m.lambda_layers->size())
      throw Error("mamba2 block " + std::to_string(layer) + ": lambda_layers has " +
                  std::to_string(m.lambda_layers->size()) + " values, none for this layer");
    lambda = (*m.lambda_layers)[static_cast<std::size_t>(layer - 1)];
  }
  return {.lambda = lambda,
          .norm = m.norm == config::Norm::rms,
          .gate = m.gate == config::Gate::silu,
          .gated_norm = m.gated_norm};
}

TaskMamba2::TaskMamba2(const config::ModelParams& model, std::uint64_t seed, int replicate)
    : model_(&model), replicate_(replicate) {
  if (model.block != config::Block::mamba2) throw Error("TaskMamba2: the model's block is not \"mamba2\"");
  if (model.model_folder.empty()) throw Error("TaskMamba2: a mamba2 model without a model folder");
  if (model.lambda_layers && model.lambda_layers->size() != static_cast<std::size_t>(model.depth))
    throw Error("TaskMamba2: lambda_layers has " + std::to_string(model.lambda_layers->size()) + " values for depth " +
                std::to_string(model.depth));
  const bool checkpoint = model.init == config::Init::checkpoint;
  loaded_ = open_model(model.model_folder, checkpoint);
  if (checkpoint && !loaded_->weights) throw Error("TaskMamba2: open_model gave no weights");
  if (checkpoint && model.depth > loaded_->shape.layers)
    throw Error("TaskMamba2: depth " + std::to_string(model.depth) + " beyond the checkpoint's " +
                std::to_string(loaded_->shape.layers) + " layers");
  const std::uint32_t draw = draw_of(model, replicate);
  if (!checkpoint) random_ = std::make_unique<const RandomWeights>(loaded_->shape, seed, draw);
  // The folder, the init and the draw determine the weights (the seed and the shape are the
  // bundle's and the folder's).
  name_ = "mamba2 " + model.model_folder + (checkpoint ? " checkpoint" : " random draw " + std::to_string(draw));
}

const WeightSource& TaskMamba2::source() const {
  if (random_) return *random_;
  return *loaded_->weights;
}

std::string TaskMamba2::input_key() const {
  if (model_->input == config::InputKind::tokens) return "tokens " + name_;
  return "input " + std::to_string(static_cast<int>(model_->input));
}

Matrix TaskMamba2::input(RandomSource& random) const {
  if (model_->input != config::InputKind::tokens) return make_input(*model_, random);
  return source().embedding(excerpt_ids(*model_, replicate_));
}

const LayerWeights& TaskMamba2::weights(int layer, RandomSource& random) const {
  return random.derived<LayerWeights>(layer, name_, 0, [&] { return source().layer(layer - 1); });
}

void TaskMamba2::apply(int layer, RandomSource& random, Matrix& X, BlockOutputs& outputs) const {
  apply_block(shape(), weights(layer, random), ablation(layer), X, &outputs, SsdForm::chunked);
}

}  // namespace rcsweep::models::mamba2
