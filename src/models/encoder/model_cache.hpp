// The model folders a process has opened, each opened once: the sweep's loading (before any work)
// and the runner (every bundle of an encoder task) get the same parsed shape and the same mapped
// checkpoint, so the weights are validated once and mapped once per process (docs/ENCODERS.md
// "In a sweep").
#pragma once
#include <filesystem>
#include <memory>

#include "checkpoint/model_folder.hpp"
#include "models/encoder/checkpoint_weights.hpp"
#include "models/encoder/encoder.hpp"

namespace rcsweep::models::encoder {

/// An opened model folder: its shape, and, when its weights were asked for, the folder mapped
/// with every tensor checked (CheckpointWeights).
struct LoadedModel {
  EncoderShape shape;
  std::shared_ptr<const checkpoint::ModelFolder> folder;  ///< null unless weights
  std::unique_ptr<const CheckpointWeights> weights;       ///< null unless weights
};

/// The model in `folder`, from a process-wide memo keyed by the folder's canonical path
/// (thread-safe). Without `weights` only config.json is read (checkpoint::ModelConfig::load, then
/// encoder_shape); with `weights` the folder is opened (checkpoint::ModelFolder::open) and every
/// tensor checked (CheckpointWeights). A call asking for weights after calls that did not replaces
/// the memo's entry by one with weights (the earlier entry stays valid for whoever holds it); a
/// call without weights returns whatever the memo holds. Throws the ConfigError of the checkpoint
/// module unchanged (naming the file, the key or the tensor); a failure is not remembered.
std::shared_ptr<const LoadedModel> open_model(const std::filesystem::path& folder, bool weights);

}  // namespace rcsweep::models::encoder
