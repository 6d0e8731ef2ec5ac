// The Mamba-2 model folders a process has opened, each opened once: the sweep's loading (before any
// work) and the runner (every bundle of a mamba2 task) get the same parsed shape and the same mapped
// checkpoint, so the weights are validated once and mapped once per process
// (docs/MAMBA2.md "In a sweep"). The encoder's memo is models/encoder/model_cache.hpp; this one is
// the same for mamba_ssm folders.
#pragma once
#include <filesystem>
#include <memory>

#include "checkpoint/model_folder.hpp"
#include "models/mamba2/mamba2.hpp"

namespace rcsweep::models::mamba2 {

/// An opened mamba_ssm model folder: its shape, and, when its weights were asked for, the folder
/// mapped with every tensor checked (CheckpointWeights, checkpoint_weights.hpp).
struct LoadedModel {
  Mamba2Shape shape;
  std::shared_ptr<const checkpoint::ModelFolder> folder;  ///< null unless weights
  std::unique_ptr<const WeightSource> weights;            ///< null unless weights: the checkpoint's
};

/// The model in `folder`, from a process-wide memo keyed by the folder's canonical path
/// (thread-safe). Without `weights` only config.json is read (checkpoint::ModelConfig::load, then
/// mamba2_shape); with `weights` the folder is opened (checkpoint::ModelFolder::open) and every
/// tensor checked (CheckpointWeights). A call asking for weights after calls that did not replaces
/// the memo's entry by one with weights (the earlier entry stays valid for whoever holds it); a
/// call without weights returns whatever the memo holds. Throws the ConfigError of the checkpoint
/// module and of mamba2_shape unchanged (naming the file, the key or the tensor); a failure is not
/// remembered.
std::shared_ptr<const LoadedModel> open_model(const std::filesystem::path& folder, bool weights);

}  // namespace rcsweep::models::mamba2
