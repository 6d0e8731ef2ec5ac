// A kind of layer (the `block` choice) as one descriptor: what the planner asks of a layer of that
// kind (its flops and seconds per task, the weights its bundle shares, its memory, the model files
// it maps), one entry per kind. The stack (MODELS.md "One layer") has no hook: its layer is its
// mixer's descriptor (mixers/mixer_kind.hpp) and the components the planner prices itself
// (plan::layer_flops, plan/cost_model.cpp, plan::memory_estimate), unchanged. The encoder's is
// models/encoder/encoder_kind.cpp, the Mamba-2 block's models/mamba2/mamba2_kind.cpp. Pure but for
// the model folder's config.json and checkpoint, read through encoder::open_model or
// mamba2::open_model (memoised: the sweep's loading opened them before any work).
#pragma once
#include <cstddef>
#include <string_view>

#include "config/params.hpp"
#include "models/mixers/mixer_kind.hpp"

namespace rcsweep::models {

/// The weights a layer's bundle shares, per layer and per distinct set of weights (a model block's
/// folder, init and draw), as float64 values.
struct BlockWeightValues {
  double drawn = 0.0;      ///< drawn as standard normals (random init)
  double converted = 0.0;  ///< converted from a mapped checkpoint (init = "checkpoint")
};

/// What a layer of the kind holds, in float64 values (the planner's MemoryEstimate, in bytes).
struct BlockMemory {
  std::size_t weights = 0;  ///< one set of a layer's weights, shared by the bundle's tasks that use it
  std::size_t input = 0;    ///< X_0 until layer 1 is done (shared by tasks of the same input)
  std::size_t state = 0;    ///< per task between layers (X)
  std::size_t scratch = 0;  ///< per task while its layer runs, the metrics' included
};

struct BlockKind {
  config::Block block;
  std::string_view name;  ///< the `block` choice in a sweep file
  /// Flops of one layer of one task without its metrics (the planner adds those of the signal
  /// and of head 0's mixer): its products, entrywise maps, norms. nullptr: the stack's.
  double (*layer_flops)(const config::ModelParams& model) = nullptr;
  /// Seconds of one layer of one task at `prices` with head 0's mixer metrics, without the signal
  /// metrics and the per-layer bookkeeping (the planner's) and without the weights the bundle
  /// shares (`weights`). nullptr: the stack's.
  double (*task_seconds)(const config::ModelParams& model, const LayerPrices& prices) = nullptr;
  /// The weights of one layer (BlockWeightValues), built once per bundle and set of weights.
  BlockWeightValues (*weights)(const config::ModelParams& model) = nullptr;
  /// What a layer holds (BlockMemory). nullptr: the stack's.
  BlockMemory (*memory)(const config::ModelParams& model) = nullptr;
  /// Bytes of model files a rank maps once, whatever its bundles (an encoder's checkpoint with
  /// init = "checkpoint": checkpoint::ModelFolder::stored_bytes); models with the same
  /// model_folder map the same files. nullptr or 0: none.
  std::size_t (*mapped_bytes)(const config::ModelParams& model) = nullptr;
};

/// The stack: every hook the planner's own.
inline constexpr BlockKind stack_block_kind{.block = config::Block::stack, .name = "stack"};
/// The BERT-family encoder block (models/encoder/encoder_kind.cpp).
extern const BlockKind encoder_block_kind;
/// The Mamba-2 block (models/mamba2/mamba2_kind.cpp).
extern const BlockKind mamba2_block_kind;

/// The descriptor of `block`.
inline const BlockKind& block_kind(config::Block block) noexcept {
  switch (block) {
    case config::Block::encoder: return encoder_block_kind;
    case config::Block::mamba2: return mamba2_block_kind;
    case config::Block::stack: break;
  }
  return stack_block_kind;
}

}  // namespace rcsweep::models
