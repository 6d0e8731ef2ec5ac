// An encoder task of a sweep (block = "encoder", docs/ENCODERS.md "In a sweep"): the model of its
// folder with its weights (the checkpoint's, or a draw of the published initialisation), its input
// X_0 and its blocks, with each block's weights built once per bundle and layer. The runner
// (models/task_runner.cpp) records the metrics; this file knows the encoder, not the store.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/matrix.hpp"
#include "config/params.hpp"
#include "models/encoder/encoder.hpp"
#include "models/encoder/model_cache.hpp"
#include "models/layer.hpp"
#include "models/random_source.hpp"

namespace rcsweep::models::encoder {

/// The ablation of block `layer` (1-based) a model asks for: lambda_attention = lambda, or with
/// lambda_layers its lambda_layer (element layer - 1); lambda_mlp = lambda_mlp, or that same
/// lambda_layer when lambda_mlp is "lambda" (lambda_mlp_is_lambda); the MLP with mlp = "model", the
/// LayerNorms with norm = "layernorm", the causal mask with mask = "causal". Throws Error when
/// lambda_layers has no value for `layer`.
Ablation ablation_of(const config::ModelParams& model, int layer);

/// The weight group of block `layer` (1-based) at any depth: shape.group_of(layer) (BERT, RoBERTa:
/// layer - 1, a fresh group per block beyond num_hidden_layers too), for ALBERT at most its last
/// group (blocks beyond num_hidden_layers apply the last group again).
int group_at(const EncoderShape& shape, int layer) noexcept;

using models::draw_of;  // models/layer.hpp

class TaskEncoder {
 public:
  /// The encoder of a task of `model` (block "encoder") with the sweep's `seed` in bundle
  /// `replicate`: open_model(model.model_folder, init == checkpoint) (memoised: the sweep's loading
  /// opened it before any work). Throws Error for a model that is not an encoder, has no folder or
  /// has lambda_layers of another length than its depth, and the ConfigError of open_model.
  TaskEncoder(const config::ModelParams& model, std::uint64_t seed, int replicate);

  const EncoderShape& shape() const noexcept { return loaded_->shape; }
  /// The ablation of block `layer` (1-based): ablation_of(model, layer).
  Ablation ablation(int layer) const { return ablation_of(*model_, layer); }
  bool measures_attention() const noexcept { return model_->measure == config::Measure::attention; }
  /// What the weights are: the folder, the init and (random) the draw. Tasks with the same name
  /// share their weights (RandomSource::derived) and, with input "tokens", their X_0.
  const std::string& weights_name() const noexcept { return name_; }

  /// Key of X_0: tasks of a bundle with equal keys have bitwise equal inputs ("tokens " + the
  /// weights' name; for the other inputs the input kind, as the stack's tasks).
  std::string input_key() const;
  /// X_0 (T x d) before input_scale: input "tokens": embed() of the first T ids of excerpt
  /// `replicate` of the token file, all real, token type 0; any other input: make_input(model,
  /// random), fed to the first block without embedding. Throws Error when the excerpt is missing
  /// or shorter than T (the sweep's checks refuse that before any work).
  Matrix input(RandomSource& random) const;
  /// The weights of block `layer` (1-based), converted or drawn once per layer for the bundle
  /// (random.derived under weights_name() and the group); ALBERT's groups, which serve every
  /// layer, once for the bundle (random.kept).
  const BlockWeights& block(int layer, RandomSource& random) const;
  /// Block `layer` on X (T x d) in place, with the ablation of that layer (apply_block).
  void apply(int layer, RandomSource& random, Matrix& X, BlockOutputs& outputs) const;

 private:
  const WeightSource& source() const;

  const config::ModelParams* model_;
  int replicate_;
  std::shared_ptr<const LoadedModel> loaded_;
  std::unique_ptr<const RandomWeights> random_;  // init "random": the draw's weights (embeddings)
  std::uint64_t seed_;
  std::uint32_t draw_;
  std::string name_;
};

}  // namespace rcsweep::models::encoder
