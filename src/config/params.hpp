// The model parameters of MODELS.md: one registry that names every parameter, its kind, default
// and meaning. Everything generic (the sweep file, the grid, the /points table of the store)
// iterates over this registry, so any parameter may be a swept axis.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/matrix.hpp"

namespace rcsweep::config {

/// A parameter value as written in a sweep file: an integer, a real, or a string
/// (a choice such as "softmax", or the scale keyword "inv_sqrt_d").
using ParamValue = std::variant<std::int64_t, double, std::string>;

enum class ParamKind {
  integer,  ///< whole number from min_int to max_int
  real,     ///< finite real number, optionally > 0 (or one of `choices` when listed: keywords)
  scale,    ///< a positive real or the string "inv_sqrt_d" (1/sqrt(d) of the same point)
  choice,   ///< one string of `choices`
};

struct ParamInfo {
  std::string_view name;
  ParamKind kind;
  ParamValue default_value;
  bool required = false;                  ///< no default: must be given in [model] or [axes]
  std::int64_t min_int = 0;               ///< integer: smallest allowed value
  bool positive = false;                  ///< real: must be > 0
  std::vector<std::string_view> choices;  ///< choice: allowed strings, first is the default
  std::string_view doc;                   ///< one line: meaning, units, source
  /// integer: largest allowed value (docs/CONFIG.md "Limits": what can be planned and stored)
  std::int64_t max_int = std::numeric_limits<int>::max();
};

/// Largest T, d, d_qk and state_dim: a T x T or d x d float64 matrix is then at most 8 GiB, and
/// products of two of them fit an int.
inline constexpr std::int64_t max_width = 32768;
/// Largest depth (layers 0..100000 per task).
inline constexpr std::int64_t max_depth_layers = 100000;

/// The registry in canonical order (the order of /points columns and of the canonical TOML).
const std::vector<ParamInfo>& model_params();
/// Index of a parameter in model_params(), or nullopt for an unknown name.
std::optional<std::size_t> param_index(std::string_view name);
/// The value of `name` in a full value vector (indexed like model_params()).
const ParamValue& param_value(const std::vector<ParamValue>& values, std::string_view name);
/// The candidate nearest to `name` within 2 edits (ignoring case; an adjacent transposition is one
/// edit), for "did you mean" messages; "" when none is close. A candidate must share more than the
/// edits with the name ("zz" suggests nothing, not "T").
std::string_view nearest(std::string_view name, const std::vector<std::string_view>& candidates);
/// A TOML basic string: quoted, with quotes, backslashes and control characters escaped (UTF-8 kept).
std::string toml_string(std::string_view s);
/// `s` for a message: every control character (NUL, line break, escape, DEL, ...) written as \xNN,
/// so that a message is never cut at a NUL nor split or recoloured by what a file holds.
std::string printable(std::string_view s);
/// Text of a value as it would be written in TOML ("softmax" quoted, 0.5, 3).
std::string to_toml(const ParamValue& value);
/// Short text of a value for tables and messages (no quotes).
std::string to_text(const ParamValue& value);

// Enumerators in the order of the choices in the registry (decoding is by position).
enum class Mixer { softmax, markov, identity, uniform, relu, sigmoid, ssd, lti, matrix, s4d };
enum class InputKind { orthonormal, sphere, gaussian, matrix, file, tokens };
enum class Norm { none, rms, layernorm };
enum class GapFix { none, perp, outliers };
enum class Gate { none, silu };
enum class Mlp { none, relu, model };
enum class BcInit { gaussian, identity };
enum class ValueInit { gaussian, orthogonal, identity };
enum class Block { stack, encoder, mamba2 };
enum class Init { random, checkpoint };
enum class Measure { block, attention };
enum class Mask { none, causal };

/// One task's model, resolved from a full value vector: enums decoded, "inv_sqrt_d" turned into
/// 1/sqrt(d), d_qk = 0 turned into d, value_scale folded into sigma_v.
struct ModelParams {
  Mixer mixer = Mixer::softmax;
  InputKind input = InputKind::orthonormal;
  int T = 0;                ///< tokens (rows of X)
  int d = 0;                ///< features (columns of X)
  int depth = 0;            ///< number of layers L; layers 0..L are recorded
  int heads = 1;            ///< attention heads H
  int d_qk = 0;             ///< query/key width (resolved: never 0)
  double sigma_qk = 1.0;    ///< std of W_Q, W_K entries
  double sigma_A = 1.0;     ///< Markov attention: relative std of Z (Mind the Gap Def. 3.1)
  double lambda = 0.0;      ///< skip strength (lambda-skip eq. (3)); 0 = no skip
  double skip_scale = 1.0;  ///< multiplies the mixer branch: Y = lambda X + skip_scale O
  Norm norm = Norm::none;
  GapFix gap_fix = GapFix::none;
  ValueInit value_init = ValueInit::gaussian;
  double sigma_v = 1.0;  ///< std of W_V entries (value_scale already folded in)
  int outliers_r = 0;    ///< gap_fix outliers: triplets removed (0: argmax gap)
  Gate gate = Gate::none;
  Mlp mlp = Mlp::none;
  int mlp_ratio = 4;        ///< MLP hidden width m = mlp_ratio * d
  double lambda_mlp = 0.0;  ///< skip strength of the MLP sub-block (resolved: lambda by default)
  /// lambda_mlp was given as "lambda" (its default): it follows lambda, and with lambda_layers the
  /// MLP sub-block of layer l takes lambda_l too. False for a number.
  bool lambda_mlp_is_lambda = false;
  int state_dim = 16;  ///< SSM state dimension N (resolved: d for bc_init identity)
  double alpha = 1.0;  ///< SSM decay of L(alpha)
  BcInit bc_init = BcInit::gaussian;
  double collapse_rate = 0.9;  ///< a of lambda-skip Theorem 4.1
  double input_scale = 1.0;    ///< factor on X_0
  /// Set by the plan, not the sweep file: attention logits as X (W_Q W_K^T) X^T with the product
  /// P = W_Q W_K^T formed once per layer and shared by the bundle (plan::make_plan decides where
  /// that saves flops); false: (X W_Q)(X W_K)^T. Mathematically equal; rounding differs.
  bool qk_product = false;
  /// input "matrix" / "file": X_0 before input_scale (T x d), shared with the spec that owns it
  /// (attached by SweepSpec::model(); null for the other inputs and before a file is loaded).
  std::shared_ptr<const Matrix> input_matrix;
  /// mixer "matrix": the T x T mixer of every layer and head (attached by SweepSpec::model()).
  std::shared_ptr<const Matrix> mixer_matrix;
  /// The layer: today's stack (MODELS.md), the BERT-family encoder block of a model folder
  /// (models/encoder/encoder.hpp; docs/CONFIG.md "Encoder blocks") or the Mamba-2 block of a
  /// mamba_ssm model folder (models/mamba2/mamba2.hpp; docs/CONFIG.md "Mamba-2 blocks").
  Block block = Block::stack;
  /// block "encoder" or "mamba2": weights drawn from the published initialisation or read from the
  /// folder's checkpoint.
  Init init = Init::random;
  int init_draw = -1;  ///< init "random": the draw of the weights (-1: the task's replicate)
  /// block "encoder": the signal whose metrics a layer records: the block's output, or its
  /// attention sub-block's branch concat_h(A_h V_h) W_O + b_O (Dong et al. Fig. 2).
  Measure measure = Measure::block;
  /// block "encoder" or "mamba2": the model folder, absolute once the sweep is loaded with its inputs
  /// (attached by SweepSpec::model(), like input_matrix); empty for the stack, and for a sweep read
  /// back from a store (merge, info), which plans without its folder.
  std::string model_folder;
  /// input "tokens": every excerpt of the token file, in file order (attached by
  /// SweepSpec::model()); null for the other inputs and before the file is loaded.
  std::shared_ptr<const std::vector<std::vector<std::int64_t>>> tokens;
  /// block "encoder" or "mamba2": the [model] lambda_layers, lambda_l of layer l = 1..L at index
  /// l - 1, which replace lambda per layer (and lambda_mlp where it is "lambda"); attached by SweepSpec::model()
  /// to every point when given (the stack refuses it: check_model()), null otherwise.
  std::shared_ptr<const std::vector<double>> lambda_layers;
  /// block "encoder": the attention mask of every block, none or causal (key j masked for query
  /// i < j).
  Mask mask = Mask::none;
  /// block "mamba2": the mixer's gated RMSNorm on (the published block) or off (y * SiLU(z) alone,
  /// mamba_ssm's rmsnorm = False path; models/mamba2/mamba2.hpp Ablation::gated_norm).
  bool gated_norm = true;

  /// True when every layer is positively homogeneous of degree 1 in X (linear mixer or a norm
  /// at the end), so X may be carried at unit norm (MODELS.md "Scale").
  bool homogeneous() const noexcept;
  /// True for the attention mixers (softmax, relu, sigmoid): logits from W_Q, W_K.
  bool attention() const noexcept;
  /// True when the mixer matrix depends on X (softmax, relu, sigmoid attention; selective SSM).
  bool input_dependent_mixer() const noexcept;
  /// True for the state-space mixers, whose value map is the identity (C_V = I, no W_V).
  bool ssm() const noexcept;
  /// True when X_L = skip_scale^L M_L..M_1 X_0 W_1..W_L: one input-independent mixer matrix per
  /// layer (not s4d), one head, lambda = 0, no norm, gate or MLP (exact gradient norms apply).
  bool linear_stack() const noexcept;
};

/// Problems of one resolved model that no single key shows, as ("key", "problem") pairs
/// (check_model()'s).
using ModelProblems = std::vector<std::pair<std::string, std::string>>;

/// A `mixer` choice as the configuration sees it: its name, the classes of mixers it belongs to
/// (what ModelParams' predicates answer) and its own checks. One row per mixer in params.cpp, in
/// the order of `enum class Mixer`; the mixer's work is its descriptor (models/mixers/).
struct MixerChoice {
  Mixer mixer;
  std::string_view name;         ///< the choice in a sweep file (at most 16 characters: /points)
  bool attention = false;        ///< logits from W_Q, W_K (ModelParams::attention)
  bool input_dependent = false;  ///< M depends on X; the others are linear in X
  bool ssm = false;              ///< a state-space mixer: value map C_V = I, no W_V
  bool per_channel = false;      ///< no single T x T M: one mixer per channel (s4d)
  /// Appends the problems of a model with this mixer that no single key shows (check_model());
  /// nullptr when it has none.
  void (*check)(const ModelParams& model, ModelProblems& problems) = nullptr;
};

/// Every mixer choice, in the order of `enum class Mixer` and of the "mixer" choices of
/// model_params().
std::span<const MixerChoice> mixer_choices() noexcept;
/// The row of `mixer`; a value outside the enum gets a row with no class and no checks.
const MixerChoice& mixer_choice(Mixer mixer) noexcept;

/// Decode a full value vector (already validated). Throws rcsweep::Error on a malformed vector.
ModelParams resolve(const std::vector<ParamValue>& values);

/// Problems of one resolved model that no single key shows (e.g. orthonormal input with T > d, an
/// input_matrix that is not T x d). Each entry is "key: problem" material; empty when the model is
/// valid. An input "file" whose matrix is not loaded yet is not a problem here.
ModelProblems check_model(const ModelParams& model);

}  // namespace rcsweep::config
