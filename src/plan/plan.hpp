// The plan: grid points x replicates = tasks, grouped into bundles that share random weights,
// with a flop-based cost model. Pure: no MPI, no I/O.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/params.hpp"
#include "config/sweep_spec.hpp"

namespace rcsweep::plan {

struct Task {
  std::uint64_t id = 0;   ///< = point * replicates + replicate (stable for a given sweep file)
  std::size_t point = 0;  ///< index into Plan::points
  int replicate = 0;
  double flops = 0.0;  ///< estimated floating-point operations of the whole task
};

/// Tasks that draw the same random tensors (same replicate, T, d): computed together so each
/// weight is generated once (common random numbers, MODELS.md "Randomness").
struct Bundle {
  std::vector<std::uint64_t> tasks;  ///< task ids, ascending
  double flops = 0.0;                ///< sum of the tasks' flops
  std::size_t shared_bytes = 0;      ///< one layer's random tensors and shared products
  std::size_t state_bytes = 0;       ///< the signals X of all its tasks
  std::size_t scratch_bytes = 0;     ///< temporaries of the largest task's layer
  std::size_t results_bytes = 0;     ///< its tasks' results, held from the first layer until written
  /// Estimated peak working set while the bundle runs (its tasks advance layer by layer).
  std::size_t bytes() const { return shared_bytes + state_bytes + scratch_bytes + results_bytes; }
};

/// Which slice of the task list a run covers (array jobs): tasks with id % count == index, or
/// with adaptive replicates those of the points with point % count == index.
struct Shard {
  int index = 0;
  int count = 1;
};

struct Plan {
  config::SweepSpec spec;
  std::vector<std::vector<config::ParamValue>> points;  ///< full value vector per point
  std::vector<config::ModelParams> models;              ///< resolved model per point
  std::vector<Task> tasks;                              ///< all tasks, by id (tasks[i].id == i)
  std::vector<Bundle> bundles;                          ///< largest first
  int max_depth = 0;                                    ///< L_max: layers 0..L_max per task
  std::string hash;                                     ///< spec.plan_hash()

  /// Which layers get a stored spectrum of X (none, the last, or all).
  bool spectrum_at(int layer) const;
  /// Length of one stored spectrum of task `t`: min(T, d).
  std::size_t spectrum_length(std::uint64_t t) const;
  /// Start of task t's layer-l spectrum in /spectra/x_sv, or -1 when not stored.
  std::int64_t spectrum_offset(std::uint64_t t, int layer) const;
  /// Total length of /spectra/x_sv.
  std::int64_t spectrum_total() const;
  /// Which layers get a stored mixer spectrum ([output] mixer_spectra): layers 1..L_max only
  /// (layer 0 has no mixer); "last" is layer L_max (nothing when L_max = 0).
  bool mixer_spectrum_at(int layer) const;
  /// Length of one stored mixer spectrum of task `t` (singular values of head 0's M, and its
  /// eigenvalues): T.
  std::size_t mixer_spectrum_length(std::uint64_t t) const;
  /// Start of task t's layer-l mixer spectrum in /spectra/m_sv (and m_eig_re, m_eig_im), or -1.
  std::int64_t mixer_spectrum_offset(std::uint64_t t, int layer) const;
  /// Total length of /spectra/m_sv.
  std::int64_t mixer_spectrum_total() const;
  double total_flops() const;
  /// Output depths L with stored gradient norms ([output] gradients): none, {L_max}, or 1..L_max.
  std::vector<int> gradient_depths() const;
  /// Whether a model's gradients use the exact (Kronecker) route rather than Hutchinson's.
  bool exact_gradients(const config::ModelParams& model) const;

 private:
  friend Plan make_plan(config::SweepSpec spec, Shard shard);
  std::vector<std::int64_t> spectrum_start_;  ///< per task: start of its first stored spectrum
  std::int64_t spectrum_total_ = 0;
  std::vector<std::int64_t> mixer_spectrum_start_;  ///< per task: start of its first mixer spectrum
  std::int64_t mixer_spectrum_total_ = 0;
};

/// Expand a validated spec into the plan. Bundles only contain tasks of `shard`.
Plan make_plan(config::SweepSpec spec, Shard shard = {});

/// Estimated flops of one layer of `model`: products, entrywise maps, random numbers (as flop
/// equivalents), components, and the metrics by the route they take: X's priced as an SVD (an
/// upper bound: the Gram route is cheaper where it applies), M's as mixer_metrics_flops. A rough
/// model, calibrated once (docs/BENCHMARKS.md). A layer of another kind than the stack is its
/// block descriptor's (models/block_kind.hpp) plus the same metrics.
double layer_flops(const config::ModelParams& model);
/// Golub–Kahan–Lanczos steps the mixer metrics take on a layer's T x T mixer (T >=
/// metrics::mixer_lanczos_min_order): the counts measured on softmax stacks show no trend in T
/// (docs/BENCHMARKS.md "Long context (T = 32768)"), so a step count independent of T.
inline constexpr double mixer_lanczos_steps = 40.0;
/// Flops of the mixer metrics of a T x T mixer: from metrics::mixer_lanczos_min_order on,
/// mixer_lanczos_steps Golub–Kahan–Lanczos steps (a product with M and one with M^T, 4 T^2 each,
/// and the reorthogonalisation, 8 j (T + T) at step j) and the pass for ||M||_F: O(T^2); below it
/// the dense route, priced as an SVD of M: O(T^3).
double mixer_metrics_flops(double T);
/// Extra flops of one stored mixer spectrum (all singular values and eigenvalues of a T x T M).
double mixer_spectrum_flops(const config::ModelParams& model);
/// Extra flops of one task's gradient norms: a taped forward pass, then the exact route's
/// products or `probes` reverse passes per output depth (each about twice a forward layer).
double gradient_flops(const config::ModelParams& model, int max_depth, const std::vector<int>& depths, bool exact,
                      int probes);
/// Bytes of one task's tape (every layer's input, weights and intermediates) kept for its reverse
/// pass; tasks are taped one at a time.
std::size_t tape_bytes(const config::ModelParams& model, int max_depth);
/// Memory of one task in a bundle: what it shares with the bundle (one layer's weights and cached
/// mixers, by kind: tasks of a bundle share a kind, different kinds add up), keeps between layers
/// (X) and needs while its layer runs (temporaries), in bytes. Another block than the stack: its
/// descriptor's (models/block_kind.hpp).
struct MemoryEstimate {
  /// shared_parts[k]: value weights, W_Q and W_K, W_Q W_K^T, Markov draws, cached input-independent
  /// mixers, SSM weights and kernels, gate, MLP, X_0, (bundles of several tasks only) the
  /// layer-1 products shared through X_0, and one set of a block's weights (an encoder's: one per
  /// folder, init and draw in a bundle).
  static constexpr std::size_t n_parts = 11, layer1_part = 9, block_weights_part = 10;
  std::array<std::size_t, n_parts> shared_parts{};
  std::size_t state = 0, scratch = 0;
  std::size_t shared() const;  ///< sum of the parts but the layer-1 one
};
MemoryEstimate memory_estimate(const config::ModelParams& model);

}  // namespace rcsweep::plan
