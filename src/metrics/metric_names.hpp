// Names of the per-layer metrics (/layers/<name> of the store) and selections of them
// ([output] metrics), all read from the registry (registry.hpp). Header-only: the config reads it
// without the numerics.
#pragma once
#include <array>
#include <bitset>
#include <cstddef>
#include <string>
#include <string_view>

#include "metrics/registry.hpp"

namespace rcsweep::metrics {

/// Names of the per-layer datasets (/layers/<name>), in storage order: layer_metrics' names.
inline constexpr std::array<std::string_view, n_layer_metrics> layer_metric_names = [] {
  std::array<std::string_view, n_layer_metrics> names{};
  for (std::size_t i = 0; i < n_layer_metrics; ++i) names[i] = layer_metrics[i].name;
  return names;
}();

/// Position of `name` in layer_metric_names (n_layer_metrics for an unknown name).
constexpr std::size_t metric_index(std::string_view name) {
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (layer_metric_names[i] == name) return i;
  return n_layer_metrics;
}

/// A selection of per-layer metrics: bit i is layer_metric_names[i].
using MetricSet = std::bitset<n_layer_metrics>;
/// Every metric.
inline MetricSet all_metrics() { return MetricSet().set(); }
/// The default of [output] metrics, also its "all": every metric but the opt-in ones
/// (MetricInfo::opt_in), which a sweep names.
inline MetricSet default_metrics() {
  MetricSet out;
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (!layer_metrics[i].opt_in) out.set(i);
  return out;
}
/// The names of a selection, space-separated in storage order.
inline std::string names_of(const MetricSet& selected) {
  std::string out;
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (selected[i]) out += (out.empty() ? "" : " ") + std::string(layer_metric_names[i]);
  return out;
}
/// The metrics of a part (registry entries whose `needs` is `part`).
inline MetricSet metrics_of(Part part) {
  MetricSet out;
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (layer_metrics[i].needs == part) out.set(i);
  return out;
}
/// The metrics every selection holds, those of the signal's norm pass (||X||_F and its logarithm):
/// they carry the scale and the divergence check, and cost one pass that every other metric needs too.
inline MetricSet always_computed() { return metrics_of(Part::signal_norm); }

/// The parts of signal_metrics a selection of metrics needs (the rest is skipped, its metrics NaN):
/// s_1 and the spectrum's sums (Part::signal_top), s_2 (signal_second, which needs s_1 too), and
/// the token-centred pass (signal_centred), the best residual (signal_best_residual, opt-in).
/// ||X||_F is always computed.
struct SignalNeeds {
  bool top = true, second = true, centred = true, best_residual = false;
};
/// The parts of mixer_metrics a selection needs: s_1(M) (Part::mixer_top) and s_2(M)
/// (mixer_second, which needs s_1 too). ||M||_F is always computed (it also enters lambda-skip's C_M).
struct MixerNeeds {
  bool top = true, second = true;
};
inline SignalNeeds signal_needs(const MetricSet& selected) {
  const bool second = (selected & metrics_of(Part::signal_second)).any();
  return {second || (selected & metrics_of(Part::signal_top)).any(), second,
          (selected & metrics_of(Part::signal_centred)).any(),
          (selected & metrics_of(Part::signal_best_residual)).any()};
}
inline MixerNeeds mixer_needs(const MetricSet& selected) {
  const bool second = (selected & metrics_of(Part::mixer_second)).any();
  return {second || (selected & metrics_of(Part::mixer_top)).any(), second};
}

}  // namespace rcsweep::metrics
