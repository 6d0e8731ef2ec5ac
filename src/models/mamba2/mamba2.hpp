// The Mamba-2 block as published (T. Dao, A. Gu, "Transformers are SSMs: Generalized Models and
// Efficient Algorithms Through Structured State Space Duality", arXiv:2405.21060) and as the
// `mamba_ssm` package computes it (Mamba2, Block, MixerModel): a pre-norm residual block whose
// mixer is in_proj -> causal depthwise conv1d + SiLU on (x, B, C) -> the SSD with input-dependent
// decay exp(Delta_t A) over heads of `headdim` channels and `ngroups` groups of B and C -> the
// gated RMSNorm with SiLU(z) -> out_proj; then the final RMSNorm (docs/MAMBA2.md).
//
// T tokens, d = d_model, E = d_inner = expand d, P = headdim, H = E / P heads, G = ngroups,
// N = d_state, K = d_conv. Head h reads group h / (H / G). With u = RMSNorm(X_(l-1)):
//
//   [z | xBC | dt] = u W_in (+ b_in)         widths E | E + 2 G N | H
//   xBC = SiLU(conv(xBC))                     xBC[t,c] <- b[c] + sum_k w[k,c] xBC[t-(K-1)+k, c]
//   [x | B | C] = xBC                         widths E | G N | G N
//   Delta[t,h] = clamp(softplus(dt[t,h] + dt_bias[h]), dt_limit)   softplus(v) = v for v > 20
//   A_h = -exp(A_log[h])
//   S_t,h = exp(Delta[t,h] A_h) S_(t-1),h + Delta[t,h] x_t,h B_t,g(h)^T     (P x N, S_(-1) = 0)
//   y_t,h = S_t,h C_t,g(h) + D_h x_t,h
//   y = RMSNorm_G(y * SiLU(z)) * w            (norm_before_gate: RMSNorm_G(y) * w * SiLU(z))
//   X_l = lambda_l X_(l-1) + y W_out (+ b_out)
//
// Per head the SSD is y_h = M_h x_h + D_h x_h with the T x T mixer matrix
//   M_h[t,s] = L_h[t,s] (C_t . B_s) Delta[s,h],   L_h[t,s] = exp(sum_(r=s+1..t) Delta[r,h] A_h), s <= t.
//
// This header is the block's data and its pure numerics (forward.cpp); where the weights come
// from is a WeightSource: drawn from the published initialisation (random_weights.cpp) or
// converted from a checkpoint folder (checkpoint_weights.hpp). No MPI, no file opened here.
// The independent reference the tests hold it against is tests/python/mamba2_reference.py.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "base/matrix.hpp"

namespace rcsweep::models::mamba2 {

/// The hyperparameters of a mamba_ssm config.json (MambaConfig with ssm_cfg {"layer": "Mamba2"};
/// absent ssm_cfg keys take Mamba2.__init__'s defaults).
struct Mamba2Shape {
  int d_model = 0;                ///< d_model
  int layers = 0;                 ///< n_layer
  int vocab = 0;                  ///< vocab_size
  int vocab_rows = 0;             ///< rows of the embedding: vocab_size rounded up to pad_vocab_size_multiple
  int d_state = 128;              ///< N
  int d_conv = 4;                 ///< K: taps of the causal convolution
  int expand = 2;                 ///< d_inner = expand d_model
  int headdim = 64;               ///< P
  int ngroups = 1;                ///< G: groups of B and C
  int chunk_size = 256;           ///< Q of the chunked SSD
  bool rmsnorm = true;            ///< the mixer's gated RMSNorm present (its norm.weight)
  bool norm_before_gate = false;  ///< RMSNorm_G(y) * w * SiLU(z) instead of RMSNorm_G(y SiLU(z)) w
  bool D_has_hdim = false;        ///< D per channel (E values) instead of per head (H)
  bool bias = false;              ///< in_proj and out_proj have biases
  bool conv_bias = true;          ///< conv1d has a bias
  double dt_limit_low = 0.0;      ///< Delta is clamped to [dt_limit_low, dt_limit_high]
  double dt_limit_high = std::numeric_limits<double>::infinity();
  double A_init_low = 1.0, A_init_high = 16.0;  ///< A_init_range: A = -U(low, high) at init
  double dt_min = 0.001, dt_max = 0.1;          ///< dt log-uniform in [dt_min, dt_max] at init
  double dt_init_floor = 1e-4;                  ///< ... clamped below by this
  double conv_init = 0.0;                       ///< conv weights U(-conv_init, conv_init); 0: 1/sqrt(K)
  double norm_eps = 1e-5;                       ///< every RMSNorm's eps (norm_epsilon)

  int d_inner() const noexcept { return expand * d_model; }
  int heads() const noexcept { return d_inner() / headdim; }
  int conv_dim() const noexcept { return d_inner() + 2 * ngroups * d_state; }
  int d_in_proj() const noexcept { return 2 * d_inner() + 2 * ngroups * d_state + heads(); }
  /// The group of B and C head h reads: h / (H / G).
  int group_of_head(int head) const noexcept { return head / (heads() / ngroups); }
};

/// One layer's weights in float64, stored to multiply on the right (nn.Linear's [out, in]
/// transposed). Empty vectors for what the shape says is absent.
struct LayerWeights {
  std::vector<double> norm;        ///< d: the block's pre-norm (layers.{i}.norm.weight)
  Matrix W_in;                     ///< d x d_in_proj: columns z | x | B | C | dt
  std::vector<double> b_in;        ///< d_in_proj when shape.bias
  Matrix conv;                     ///< K x conv_dim: conv[k][c] = conv1d.weight[c, 0, k]
  std::vector<double> conv_bias;   ///< conv_dim when shape.conv_bias
  std::vector<double> dt_bias;     ///< H
  std::vector<double> A_log;       ///< H: A_h = -exp(A_log[h])
  std::vector<double> D;           ///< H, or E when shape.D_has_hdim
  std::vector<double> gated_norm;  ///< E when shape.rmsnorm: the gated RMSNorm's weight
  Matrix W_out;                    ///< E x d
  std::vector<double> b_out;       ///< d when shape.bias
};

/// Where a model's weights come from. Implementations: RandomWeights (below) and
/// CheckpointWeights (checkpoint_weights.hpp). Calls may come from several threads at once.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const Mamba2Shape& shape() const = 0;
  /// Rows `ids` of the embedding (ids.size() x d), each id in [0, vocab_rows).
  virtual Matrix embedding(std::span<const std::int64_t> ids) const = 0;
  /// The final RMSNorm's weight (norm_f, d).
  virtual std::vector<double> final_norm() const = 0;
  /// The weights of layer `layer` (0-based; a checkpoint has shape().layers of them, a random draw
  /// any number).
  virtual LayerWeights layer(int layer) const = 0;
};

/// The published initialisation (MambaLMHeadModel's): embedding N(0, 0.02^2); in_proj and out_proj
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear's default), out_proj then divided by
/// sqrt(shape.layers) (rescale_prenorm_residual; the config's n_layer, whatever depth is run, so
/// that a layer's weights never depend on the depth), biases 0; conv1d weight and bias
/// U(-1/sqrt(K), 1/sqrt(K)) (conv_init when set); dt = max(exp(U(log dt_min, log dt_max)),
/// dt_init_floor), dt_bias = dt + log(-expm1(-dt)) (the inverse softplus); A_log = log U(A_init_range);
/// D = 1; every norm weight 1. Each tensor is its own Philox stream keyed by (seed, draw, layer,
/// tensor), an embedding row drawn without the others. Bitwise reproducible.
class RandomWeights final : public WeightSource {
 public:
  RandomWeights(Mamba2Shape shape, std::uint64_t seed, std::uint32_t draw);
  const Mamba2Shape& shape() const override { return shape_; }
  Matrix embedding(std::span<const std::int64_t> ids) const override;
  std::vector<double> final_norm() const override;
  LayerWeights layer(int layer) const override;

 private:
  Mamba2Shape shape_;
  std::uint64_t seed_;
  std::uint32_t draw_;
};

/// The ablations of lambda-skip §5 (Figs. 1-3): a block is X_l = lambda X_(l-1) + Mixer(norm(X_(l-1)))
/// with lambda = 1 the published residual, 0 none, any real value (negative too); norm the
/// block's pre-norm (off: the identity; the final norm follows the same switch); gate SiLU(z) on or
/// off (off: y alone goes into the gated norm); gated_norm the mixer's RMSNorm on or off (off:
/// y * SiLU(z), mamba_ssm's rmsnorm = False path).
struct Ablation {
  double lambda = 1.0;
  bool norm = true;
  bool gate = true;
  bool gated_norm = true;
};

/// The three ways of computing the SSD, equal to rounding: the linear-time scan over t, the
/// quadratic form M_h x_h (T x T per head), and the chunked state passing (quadratic within chunks
/// of chunk_size tokens, the state carried between them: memory linear in T).
enum class SsdForm { scan, quadratic, chunked };

/// The SSD's inputs of one layer for the normed input u (T x d).
struct SsdInputs {
  Matrix z;               ///< T x E: the gate's input
  Matrix x;               ///< T x E: after the convolution and SiLU; head h is columns h P .. h P + P - 1
  Matrix B, C;            ///< T x G N: group g is columns g N .. g N + N - 1
  Matrix delta;           ///< T x H: Delta, clamped to the dt limit
  std::vector<double> A;  ///< H: -exp(A_log)
};

/// The in_proj, convolution, SiLU and softplus of a layer on u (T x d).
SsdInputs ssm_inputs(const Mamba2Shape& shape, const LayerWeights& weights, const Matrix& u);

/// y (T x E) = the SSD of `inputs` plus D x, in the form asked (chunk: the chunked form's chunk
/// length; 0: shape.chunk_size). Every form gives the same values to rounding.
Matrix ssd(const Mamba2Shape& shape, const SsdInputs& inputs, std::span<const double> D, SsdForm form, int chunk = 0);

/// Head h's T x T mixer matrix M_h (lower triangular), with D_h added on the diagonal when D is
/// per head (not when it is per channel).
Matrix mixer_matrix(const Mamba2Shape& shape, const SsdInputs& inputs, std::span<const double> D, int head);

/// Row-wise RMSNorm in place: x / sqrt(mean(x^2) + eps) * w over the row's columns (groups: each
/// row's columns in `groups` equal parts normalised separately).
void rms_norm(std::span<const double> w, double eps, Matrix& X, int groups = 1);

/// What a block reports besides its output.
struct BlockOutputs {
  Matrix mixer;             ///< T x d: the branch Mixer(norm(X_(l-1)))
  Matrix head0;             ///< T x T: head 0's mixer matrix (only when asked)
  bool keep_head0 = false;  ///< set before the call
};

/// One block on X (T x d) in place: X = lambda X + Mixer(norm(X)), the SSD in `form`.
/// `outputs` (nullable) receives the intermediate values.
void apply_block(const Mamba2Shape& shape, const LayerWeights& weights, const Ablation& ablation, Matrix& X,
                 BlockOutputs* outputs = nullptr, SsdForm form = SsdForm::chunked);

/// The final norm on X_L (T x d) in place (RMSNorm with norm_f; nothing when !ablation.norm).
void apply_final_norm(const Mamba2Shape& shape, std::span<const double> norm_f, const Ablation& ablation, Matrix& X);

}  // namespace rcsweep::models::mamba2
