// A mixer as one descriptor: its forward (the T x T mixer of a head, or its own mixing step), what
// the layer and the reverse pass need of it, what the planner asks of it (its flops and seconds
// per layer, its draws, what it holds in memory and the work its bundle shares) and the weights
// it dumps, one entry per mixer, each in its own file of src/models/mixers/ and registered in
// mixers.cpp. What the configuration needs of a mixer (its classes, its checks) is its row of
// config::mixer_choices(). Pure: no MPI, no I/O.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include <span>
#include <string_view>

#include "config/params.hpp"
#include "models/layer.hpp"

namespace rcsweep::models {

/// Flop-equivalents of one standard normal (Philox + Box–Muller: log, sqrt, sin/cos), an order of
/// magnitude; used only to weigh weight generation against products in the planner's flop count.
inline constexpr double normal_flops = 30.0;
/// Flop-equivalents of an exp and a divide (a softmax or Markov entry).
inline constexpr double exp_flops = 20.0;

/// The prices the planner puts on a layer's kinds of work, from the machine's measured rates
/// (plan/cost_model.hpp's Calibration), in seconds and per second.
class LayerPrices {
 public:
  virtual ~LayerPrices() = default;
  /// Seconds of an m x k times k x n product.
  virtual double gemm(double m, double n, double k) const = 0;
  /// Seconds of the mixer metrics of head 0's T x T mixer (0 when the selected metrics skip them).
  virtual double mixer_metrics(double T) const = 0;
  virtual double exp_rate() const = 0;   ///< softmax entries per second (exp, sum, scale)
  virtual double pass_rate() const = 0;  ///< entries per second of a simple pass
  virtual double conv_rate() const = 0;  ///< multiply-adds per second of the S4D causal convolution
};

/// The random numbers a mixer draws per layer and head, shared by the bundle's tasks (the value,
/// query and key weights every mixer may use are the planner's).
struct MixerDraws {
  std::size_t square = 0;  ///< a T x T Gaussian (Markov)
  std::size_t ssm = 0;     ///< SSM weights B and C
};

/// What a mixer holds in a layer beyond its draws, in float64 values.
struct MixerMemory {
  bool fixed_mixer = false;  ///< one input-independent T x T M per head, built once per layer and shared by the bundle
  std::size_t kernels = 0;   ///< values built from the draws and shared by the bundle (S4D's kernels)
  std::size_t scratch = 0;   ///< the mixer's own temporaries in a task's layer
};

/// The weights of a mixer that `rcsweep run --dump-weights` writes per layer beyond M, M_raw and
/// W_V (store/dump.cpp), as (rows, cols), in the order written.
struct MixerDump {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> per_head;   ///< per head (W_Q, W_K; W_B, W_C)
  std::vector<std::pair<std::uint64_t, std::uint64_t>> per_layer;  ///< once per layer (S4D's kernels)
};

/// The defaults of a descriptor without draws of its own, without weights to dump beyond M, M_raw
/// and W_V, or with no seconds of a kind (shared work, M(X)).
inline MixerDraws no_draws(const config::ModelParams&) { return {}; }
inline MixerDump no_dump(const config::ModelParams&) { return {}; }
inline double no_seconds(const config::ModelParams&, const LayerPrices&) { return 0.0; }
/// The memory of an input-independent mixer: one M per layer and head, built once and shared by the bundle.
inline MixerMemory fixed_mixer_memory(const config::ModelParams&) { return {.fixed_mixer = true}; }

/// One mixer's descriptor, written with designated initialisers (a field left out takes its
/// default: no draws, no dump, no seconds of a kind, no hook). The functions take a resolved model
/// whose `mixer` is this one.
struct MixerKind {
  config::Mixer mixer;
  std::string_view name;  ///< the `mixer` choice in a sweep file (config::model_params())
  /// No single M: one mixer per channel (S4D), applied by its own `apply` and taped as one head.
  bool per_channel = false;
  /// Flops of the mixer's own work in one layer of one task, every head: its products, entrywise
  /// maps and its weights drawn (as normal_flops each). The planner adds the gap fix, gate, MLP,
  /// norm and metrics (plan::layer_flops).
  double (*layer_flops)(const config::ModelParams& model);
  /// Seconds of the mixer's own work in one layer of one task at `prices`, without what the
  /// bundle's tasks share (its weights, an input-independent mixer: plan/cost_model.cpp); with the
  /// mixer metrics of head 0 where each task has its own mixer.
  double (*task_seconds)(const config::ModelParams& model, const LayerPrices& prices);
  /// Its draws per layer and head (MixerDraws).
  MixerDraws (*draws)(const config::ModelParams& model) = no_draws;
  /// What it holds in a layer beyond its draws (MixerMemory).
  MixerMemory (*memory)(const config::ModelParams& model);
  /// Seconds per layer of work on its draws that the bundle's tasks share, beyond drawing them and
  /// building a fixed mixer (which the planner prices): S4D's kernels.
  double (*shared_seconds)(const config::ModelParams& model, const LayerPrices& prices) = no_seconds;
  /// Seconds of one task's input-dependent mixer M(X) of a layer with its metrics, without X W_V
  /// (and, with qk_product, without X P): what tasks on the same X_0 share at layer 1. 0 for an
  /// input-independent mixer.
  double (*input_mixer_seconds)(const config::ModelParams& model, const LayerPrices& prices) = no_seconds;
  /// Its weights in a weights dump (MixerDump).
  MixerDump (*dump)(const config::ModelParams& model) = no_dump;
  /// The forward: the T x T mixer of head `head` at `layer` for signal X, before gap_fix (the
  /// contract of models::mixer_matrix, models/layer.hpp); a per-channel mixer throws rcsweep::Error.
  Matrix (*matrix)(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                   const ProductCache& products, SsdFactors* factors, Matrix storage);

  // The layer (models/layer.cpp apply_layer), each hook nullptr where the mixer has none.
  /// An attention mixer's entrywise map of its T x T logits S, in place (models::attention_map).
  void (*map)(Matrix& S) = nullptr;
  /// Whether `matrix` gives head 0's factors of M (`factors`) for `model`, from which
  /// `factors_operator` forms products with M (after a perp gap fix) in less than O(T^2): the
  /// mixer metrics then take them where they use Lanczos (SSD's scans, models::ssd_operator).
  bool (*has_factors)(const config::ModelParams& model) = nullptr;
  linalg::LinearOperator (*factors_operator)(const config::ModelParams& model, const SsdFactors& factors) = nullptr;
  /// A head's mixing product acc <- beta acc + alpha M V (V: T x d, contiguous rows) when it is
  /// not the GEMM (the identity without a gap fix adds alpha V).
  void (*mix)(const config::ModelParams& model, const Matrix& M, ConstMatrixView V, double alpha, double beta,
              Matrix& acc) = nullptr;
  /// Tape mode: what the reverse pass needs of head `head` beyond M, M_raw, W_V and V (HeadTape:
  /// attention's W_Q, W_K, Q, K; SSD's W_B, W_C, B, C).
  void (*record)(const config::ModelParams& model, int layer, int head, const Matrix& X, RandomSource& random,
                 HeadTape& tape) = nullptr;
  /// A per-channel mixer's whole mixing step: acc <- beta acc + skip_scale O(X), filling the tape
  /// (one head: W_V = I, V = X, and its own tensors) and the stats (no mixer metrics; C_M and S
  /// of lambda-skip Theorem 4.1). Set exactly when per_channel.
  void (*apply)(const config::ModelParams& model, int layer, const Matrix& X, double beta, Matrix& acc,
                RandomSource& random, LayerTape* tape, LayerStats* stats) = nullptr;

  // The reverse pass (models/gradients.cpp layer_vjp).
  /// An input-dependent mixer: adds to G_X the cotangent of X through M(X), given G_M, the
  /// cotangent of M before gap_fix (may be overwritten), P, the mixer before gap_fix, and the
  /// head's tape. Set exactly for the mixers whose M depends on X.
  void (*vjp)(const config::ModelParams& model, const HeadTape& head, const Matrix& X, const Matrix& P, Matrix& G_M,
              Matrix& G_X) = nullptr;
  /// A per-channel mixer: the transpose of its mixing (skip_scale aside) applied to G (T x d),
  /// from the layer's tape. Set exactly when per_channel.
  Matrix (*apply_transpose)(const LayerTape& tape, const Matrix& G) = nullptr;
};

/// Flops of a layer whose mixer is fixed or trivial: per head X W_V (2 T d^2) and the value
/// weights drawn (normal_flops d^2).
inline double value_map_flops(const config::ModelParams& m) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * (2.0 * T * d * d + normal_flops * d * d);
}
/// Seconds of a layer whose T x T M is given: per head M X and (M X) W_V.
inline double given_mixer_seconds(const config::ModelParams& m, const LayerPrices& p) {
  const double T = m.T, d = m.d, H = m.heads;
  return H * (p.gemm(T, d, d) + p.gemm(T, d, T));
}

/// The descriptor of `mixer` (mixers.cpp lists them). Throws rcsweep::Error for a value that has none.
const MixerKind& mixer_kind(config::Mixer mixer);

/// Every registered descriptor, in the order of the `mixer` choices.
std::span<const MixerKind* const> mixer_kinds();

}  // namespace rcsweep::models
