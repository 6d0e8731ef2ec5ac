// A Mamba-2 task of a sweep (block = "mamba2", docs/MAMBA2.md "In a sweep"): the model of its
// folder with its weights (the checkpoint's, or a draw of the published initialisation), its input
// X_0 and its blocks, with each block's weights built once per bundle and layer. The runner
// (models/task_runner.cpp) records the metrics; this file knows the block, not the store.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/matrix.hpp"
#include "config/params.hpp"
#include "models/mamba2/mamba2.hpp"
#include "models/mamba2/model_cache.hpp"
#include "models/layer.hpp"
#include "models/random_source.hpp"

namespace rcsweep::models::mamba2 {

/// The ablation of block `layer` (1-based) a model asks for (lambda-skip §5): lambda, or with
/// lambda_layers its lambda_layer (element layer - 1); the block's pre-norm with norm = "rms"; the
/// gate SiLU(z) with gate = "silu"; the mixer's gated RMSNorm with gated_norm. Throws Error when
/// lambda_layers has no value for `layer`.
Ablation ablation_of(const config::ModelParams& model, int layer);

using models::draw_of;  // models/layer.hpp

class TaskMamba2 {
 public:
  /// The Mamba-2 model of a task of `model` (block "mamba2") with the sweep's `seed` in bundle
  /// `replicate`: open_model(model.model_folder, init == checkpoint) (memoised: the sweep's loading
  /// opened it before any work). Throws Error for a model whose block is not "mamba2", that has no
  /// folder, has lambda_layers of another length than its depth, or (init = "checkpoint") a depth
  /// beyond the checkpoint's n_layer; and the ConfigError of open_model.
  TaskMamba2(const config::ModelParams& model, std::uint64_t seed, int replicate);

  const Mamba2Shape& shape() const noexcept { return loaded_->shape; }
  /// The ablation of block `layer` (1-based): ablation_of(model, layer).
  Ablation ablation(int layer) const { return ablation_of(*model_, layer); }
  /// What the weights are: the folder, the init and (random) the draw. Tasks with the same name
  /// share their weights (RandomSource::derived) and, with input "tokens", their X_0.
  const std::string& weights_name() const noexcept { return name_; }

  /// Key of X_0: tasks of a bundle with equal keys have bitwise equal inputs ("tokens " + the
  /// weights' name; for the other inputs the input kind, as the stack's tasks).
  std::string input_key() const;
  /// X_0 (T x d) before input_scale: input "tokens": the embedding rows of the first T ids of
  /// excerpt `replicate` of the token file; any other input: make_input(model, random), fed to the
  /// first block without embedding. Throws Error when the excerpt is missing or shorter than T (the
  /// sweep's checks refuse that before any work).
  Matrix input(RandomSource& random) const;
  /// The weights of block `layer` (1-based: the source's layer - 1), converted or drawn once per
  /// layer for the bundle (random.derived under weights_name()).
  const LayerWeights& weights(int layer, RandomSource& random) const;
  /// Block `layer` on X (T x d) in place, with the ablation of that layer (apply_block, the chunked
  /// SSD); `outputs` receives the branch and (keep_head0) head 0's T x T mixer matrix.
  void apply(int layer, RandomSource& random, Matrix& X, BlockOutputs& outputs) const;

 private:
  const WeightSource& source() const;

  const config::ModelParams* model_;
  int replicate_;
  std::shared_ptr<const LoadedModel> loaded_;
  std::unique_ptr<const RandomWeights> random_;  // init "random": the draw's weights
  std::string name_;
};

}  // namespace rcsweep::models::mamba2
