// The per-layer metrics, one entry each: name, description, units, the part of a layer's metric
// work it needs and, through that part, its cost. Everything else reads this table: the store's
// /layers datasets with their descriptions and units (store/schema.cpp) and which of them every
// store has (the core metrics, store/open.cpp), [output] metrics (config), the parts
// signal_metrics and mixer_metrics compute for a selection and the cost model prices
// (metric_names.hpp), the planner's bytes per layer of a task's results (plan/memory.cpp), and
// through the store the Python toolkit (names and descriptions from /layers). Header-only: the
// config reads it without the numerics. Adding a metric: docs/CONTRIBUTING.md "Worked path: add a
// metric".
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rcsweep::metrics {

/// The parts of a layer's metric work. signal_metrics and mixer_metrics compute a part once for
/// every metric that needs it and skip a part that no selected metric needs (its metrics NaN);
/// the planner prices parts, not metrics (a metric costs nothing beyond its part).
enum class Part : std::uint8_t {
  signal_norm,           ///< ||X||_F: one pass over X; never skipped (the scale and the divergence check)
  signal_top,            ///< s_1(X) and the spectrum's sums Σs², Σs⁴: the Gram matrix and its eigenvalues
  signal_second,         ///< s_2(X) as well (implies signal_top; Lanczos on a collapsed spectrum)
  signal_centred,        ///< the token-centred X - 1 xbar^T: two more passes over X
  mixer_norm,            ///< ||M||_F: one pass over M (also lambda-skip's C_M); never skipped
  mixer_top,             ///< s_1(M): Lanczos on M from mixer_lanczos_min_order on, else its Gram eigenvalues
  mixer_second,          ///< s_2(M) as well (implies mixer_top)
  signal_best_residual,  ///< min_x ||X - 1 x^T||_{1,inf} (best_residual.hpp): hundreds of passes over X; opt-in
};

/// What a part costs per layer, for a T x d signal X and a T x T mixer M: the order of its work
/// and where the planner prices it (plan/cost_model.cpp, plan/plan.cpp).
struct PartCost {
  Part part;
  std::string_view work;       ///< the order of its work, e.g. "O(T d)"
  std::string_view priced_by;  ///< the planner's price of it
};
inline constexpr std::array<PartCost, 8> part_costs = {{
    {Part::signal_norm, "O(T d): one pass over X", "layer_flops' 8 T d; Pricer::signal_metrics"},
    {Part::signal_top, "O(T d min(T, d)): Gram product and eigenvalues (SVD when collapsed)",
     "layer_flops' svd_values_flops(T, d); Pricer::signal_metrics (calibration signal_s)"},
    {Part::signal_second, "as signal_top, plus Lanczos on a collapsed spectrum",
     "with signal_top (the calibration measures both)"},
    {Part::signal_centred, "O(T d): two passes over X", "layer_flops' 8 T d; Pricer::signal_metrics"},
    {Part::mixer_norm, "O(T^2): one pass over M", "with the mixer (its own pass rate)"},
    {Part::mixer_top, "O(T^2 k) Lanczos, k steps, from T = 256; O(T^3) below",
     "mixer_metrics_flops(T); Pricer::mixer_metrics (calibration mixer_s), skipped when no metric needs it"},
    {Part::mixer_second, "as mixer_top", "with mixer_top"},
    {Part::signal_best_residual, "O(T d) per L-BFGS step, a few hundred steps (best_residual.hpp)",
     "add_tasks' best_residual_passes T d; Pricer::signal_metrics (calibration pass_rate), when selected"},
}};

/// One per-layer metric: the dataset /layers/<name> of the store, a column of load() and tidy().
struct MetricInfo {
  std::string_view name;         ///< dataset and column name, [output] metrics' word
  std::string_view description;  ///< the dataset's `description` attribute (docs/SCHEMA.md)
  std::string_view units;        ///< the dataset's `units` attribute: "X", units of the input X_0; "ln X", its
                                 ///< logarithm; "1", dimensionless
  Part needs;                    ///< the part of the work it is computed in (and what it costs)
  /// Computed only when [output] metrics names it: not in the default selection ("all"), so that
  /// a default sweep costs what it did (an expensive metric).
  bool opt_in = false;
};

/// The per-layer metrics in storage order (the order of a LayerRow and of /layers; a new metric
/// goes at the end, after the core metrics below). Descriptions and units are stored in every new
/// store: change them only with the docs.
inline constexpr std::array<MetricInfo, 14> layer_metrics = {{
    {"fro", "||X_l||_F, true scale (may be +inf when it exceeds the double range; see log_fro)", "X",
     Part::signal_norm},
    {"log_fro", "ln ||X_l||_F, true scale (finite even when fro overflows)", "ln X", Part::signal_norm},
    {"s1", "largest singular value of X_l, true scale", "X", Part::signal_top},
    {"s2", "second singular value of X_l, true scale (0 when min(T,d) = 1)", "X", Part::signal_second},
    {"sr_cov", "stable rank of X_l X_l^T: sum s_i^4 / s_1^4 (Mind the Gap eq. (5)); scale-free", "1", Part::signal_top},
    {"sr_x", "stable rank of X_l: sum s_i^2 / s_1^2; scale-free", "1", Part::signal_top},
    {"mu", "||X_l - 1 xbar^T||_F, xbar the token mean (lambda-skip eq. (5)), true scale", "X", Part::signal_centred},
    {"mu_rel", "mu / ||X_l||_F; scale-free", "1", Part::signal_centred},
    {"res_rel", "||X_l - 1 xbar^T||_{1,inf} / ||X_l||_{1,inf} (Dong et al. sec. 2); scale-free", "1",
     Part::signal_centred},
    {"m_s1", "s_1(M) of the layer's mixer matrix after gap_fix (Mind the Gap Thm 2.1)", "1", Part::mixer_top},
    {"m_s2", "s_2(M) of the layer's mixer matrix after gap_fix", "1", Part::mixer_second},
    {"m_gap", "s_1(M) / s_2(M) of the layer's mixer matrix after gap_fix", "1", Part::mixer_second},
    {"m_fro", "||M||_F of the layer's mixer matrix after gap_fix", "1", Part::mixer_norm},
    {"res_best",
     "min_x ||X_l - 1 x^T||_{1,inf} / ||X_l||_{1,inf} (Dong et al. sec. 2.2), certified to 1e-4; scale-free", "1",
     Part::signal_best_residual, true},
}};
inline constexpr std::size_t n_layer_metrics = layer_metrics.size();

/// The core metrics: the first n_core_metrics entries, the registry as of schema version
/// core_metrics_schema (the store's schema_version, which checks that the two agree). Every store
/// of that schema has their /layers datasets, and a reader refuses one without them as damaged. An
/// entry after them was added without a new schema version: a store made before it lacks its
/// dataset, which the readers take as NaN in every row and a resume creates (docs/SCHEMA.md
/// "Adding a metric"). A new schema version makes every entry of the day core.
inline constexpr int core_metrics_schema = 2;
inline constexpr std::size_t n_core_metrics = 13;
static_assert(n_core_metrics >= 1 && n_core_metrics <= n_layer_metrics, "the core metrics are registry entries");

/// Bytes one metric takes per layer of a task's results (a float64 in /layers, TaskValues and the
/// packed result message).
inline constexpr std::size_t metric_bytes_per_layer = sizeof(double);

/// The cost of a part (part_costs' entry).
constexpr const PartCost& cost_of(Part part) {
  for (const PartCost& c : part_costs)
    if (c.part == part) return c;
  return part_costs[0];  // unreachable: every part has an entry (tests/unit/metrics)
}

}  // namespace rcsweep::metrics
