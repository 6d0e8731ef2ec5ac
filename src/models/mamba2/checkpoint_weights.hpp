// A mamba_ssm checkpoint of a Mamba-2 model (MambaLMHeadModel with ssm_cfg {"layer": "Mamba2"}) as
// Mamba-2 weights: config.json's keys as a Mamba2Shape, and the tensors of the folder mapped to the
// block's roles by ONE table (tensor_table). Every tensor the model needs is checked (present,
// shape, float dtype) when the source is built, before any work; then each call converts only what
// it is asked for, to float64, with nn.Linear weights transposed to multiply on the right and the
// convolution's [conv_dim, 1, d_conv] as d_conv x conv_dim (docs/CHECKPOINTS.md "Mamba-2
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
#include "models/mamba2/mamba2.hpp"

namespace rcsweep::models::mamba2 {

/// The Mamba2Shape of a mamba_ssm config.json (MambaConfig): d_model, n_layer, vocab_size and
/// ssm_cfg required; pad_vocab_size_multiple (default 8) rounds the embedding's rows up;
/// d_intermediate (0), attn_layer_idx ([]), rms_norm (true) must keep their defaults; attn_cfg,
/// residual_in_fp32, fused_add_norm, tie_embeddings (rounding or the LM head only) and any other
/// top-level key are not read. ssm_cfg: "layer" must be "Mamba2"; d_state (128), d_conv (4),
/// expand (2), headdim (64), ngroups (1), chunk_size (256), A_init_range ([1, 16]), dt_min (0.001),
/// dt_max (0.1), dt_init_floor (1e-4), dt_limit ([0, inf]), conv_init (none), rmsnorm (true),
/// norm_before_gate (false), D_has_hdim (false), bias (false), conv_bias (true), d_ssm (none: must
/// equal d_inner when set), use_mem_eff_path (not read); any other ssm_cfg key is refused. Every
/// RMSNorm's eps is 1e-5 (MixerModel's norm_epsilon, which MambaConfig does not set). Throws
/// ConfigError naming the file and each key at fault (every problem at once): Hugging Face
/// transformers' own layout (model_type without d_model), a missing required key, a value of
/// another type (a JSON null counts as missing), a size below 1 or above its limit (d_model and
/// headdim 32768, n_layer 100000, vocab_size 10^7, pad_vocab_size_multiple 65536, d_state 16384,
/// d_conv 1024, expand 64, ngroups 32768, chunk_size 2^20), ssm_cfg.layer missing (mamba_ssm then
/// builds Mamba1) or another layer, an MLP (d_intermediate), attention layers, LayerNorm models
/// (rms_norm false), d_ssm other than d_inner, headdim not dividing d_inner, ngroups not dividing
/// the heads, A_init_range or dt_limit not two numbers with 0 < low <= high (dt_limit: 0 <= low),
/// dt_min > dt_max or not positive, dt_init_floor negative, conv_init not positive.
Mamba2Shape mamba2_shape(const checkpoint::ModelConfig& config);

/// The part of the model a checkpoint tensor holds (WeightSource results and LayerWeights fields).
enum class Role : std::uint8_t {
  embedding,      ///< WeightSource::embedding, [vocab_rows, d_model]
  final_norm,     ///< WeightSource::final_norm (norm_f), [d_model]
  norm,           ///< LayerWeights::norm, [d_model]
  in_proj,        ///< W_in, Linear [d_in_proj, d_model]
  in_proj_bias,   ///< b_in, [d_in_proj] (ssm_cfg.bias)
  conv,           ///< conv, [conv_dim, 1, d_conv]
  conv_bias,      ///< conv_bias, [conv_dim] (ssm_cfg.conv_bias)
  dt_bias,        ///< dt_bias, [nheads]
  A_log,          ///< A_log, [nheads]
  D,              ///< D, [nheads] ([d_inner] with ssm_cfg.D_has_hdim)
  gated_norm,     ///< gated_norm, [d_inner] (ssm_cfg.rmsnorm)
  out_proj,       ///< W_out, Linear [d_model, d_inner]
  out_proj_bias,  ///< b_out, [d_model] (ssm_cfg.bias)
};
inline constexpr std::size_t role_count = 13;

/// One row of the table: the role and its tensor's name in MambaLMHeadModel's state_dict, where
/// "{layer}" stands for the layer (0-based).
struct TensorEntry {
  Role role;
  std::string_view name;
};

/// The table: every role once, the model's two (embedding, final_norm) first. lm_head.weight (the
/// LM head, tied to the embedding) is not in it and is ignored.
std::span<const TensorEntry> tensor_table();
/// `name` with "{layer}" replaced by `layer`.
std::string tensor_name(std::string_view name, int layer);
/// Whether the model of `shape` has `role`'s tensor (the biases, conv_bias and gated_norm are
/// switched by ssm_cfg).
bool has_role(const Mamba2Shape& shape, Role role);
/// The stored shape of `role`'s tensor for `shape`.
std::vector<std::size_t> stored_shape(const Mamba2Shape& shape, Role role);

/// The weights of an opened model folder. The folder is held by a shared_ptr, so the source keeps
/// its files mapped for as long as it lives. Thread-safe: every call is const and converts into
/// memory of its own.
class CheckpointWeights final : public WeightSource {
 public:
  /// Reads the shape (mamba2_shape) and checks every tensor the model needs, of every layer:
  /// present, of the shape the config gives, of a float dtype (F64, F32, F16, BF16); a tensor the
  /// config switches off (in_proj.bias and out_proj.bias without ssm_cfg.bias, conv1d.bias with
  /// conv_bias false, the mixer's norm.weight with rmsnorm false) must be absent (mamba_ssm's strict
  /// loading refuses it). Throws ConfigError naming the file and the tensor, every problem at once
  /// (the first 20, then a count). Tensors the table does not name (lm_head.weight) are ignored.
  explicit CheckpointWeights(std::shared_ptr<const checkpoint::ModelFolder> folder);
  /// ModelFolder::open(folder) and the checks above.
  static std::shared_ptr<const CheckpointWeights> open(const std::filesystem::path& folder);

  const Mamba2Shape& shape() const override { return shape_; }
  /// Rows `ids` of backbone.embedding.weight (any order, repeats allowed), converting only those
  /// rows. Throws Error for an id outside [0, vocab_rows).
  Matrix embedding(std::span<const std::int64_t> ids) const override;
  std::vector<double> final_norm() const override;
  /// The tensors of layer `layer` (0 <= layer < shape().layers) as float64: W_in(i, j) is the stored
  /// in_proj.weight[j][i], W_out likewise, conv(k, c) is conv1d.weight[c][0][k]. Throws Error for
  /// another layer.
  LayerWeights layer(int layer) const override;

  const checkpoint::ModelFolder& folder() const noexcept { return *folder_; }

 private:
  std::shared_ptr<const checkpoint::ModelFolder> folder_;
  Mamba2Shape shape_;
};

}  // namespace rcsweep::models::mamba2
