// Names of the per-layer metrics (/layers/<name> of the store) and selections of them
// ([output] metrics). Header-only: the config reads it without the numerics.
#pragma once
#include <array>
#include <bitset>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace rcsweep::metrics {

/// Names of the per-layer datasets (/layers/<name>), in storage order.
inline constexpr std::array<std::string_view, 13> layer_metric_names = {
    "fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel", "m_s1", "m_s2", "m_gap", "m_fro"};
inline constexpr std::size_t n_layer_metrics = layer_metric_names.size();

/// Position of `name` in layer_metric_names (n_layer_metrics for an unknown name).
constexpr std::size_t metric_index(std::string_view name) {
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (layer_metric_names[i] == name) return i;
  return n_layer_metrics;
}

/// A selection of per-layer metrics: bit i is layer_metric_names[i].
using MetricSet = std::bitset<n_layer_metrics>;
/// Every metric (the default of [output] metrics).
inline MetricSet all_metrics() { return MetricSet().set(); }
/// The names of a selection, space-separated in storage order.
inline std::string names_of(const MetricSet& selected) {
  std::string out;
  for (std::size_t i = 0; i < n_layer_metrics; ++i)
    if (selected[i]) out += (out.empty() ? "" : " ") + std::string(layer_metric_names[i]);
  return out;
}
/// The metrics every selection holds: ||X||_F and its logarithm carry the scale and the
/// divergence check, and cost one pass that every other metric needs too.
inline MetricSet always_computed() { return MetricSet().set(metric_index("fro")).set(metric_index("log_fro")); }

/// The parts of signal_metrics a selection of metrics needs (the rest is skipped, its metrics NaN):
/// s_1 and the spectrum's sums (s1, sr_cov, sr_x), s_2 (which needs s_1 too), and the token-centred
/// pass (mu, mu_rel, res_rel). ||X||_F is always computed.
struct SignalNeeds {
  bool top = true, second = true, centred = true;
};
/// The parts of mixer_metrics a selection needs: s_1(M) (m_s1, m_gap) and s_2(M) (m_s2, m_gap).
/// ||M||_F is always computed (it also enters lambda-skip's C_M).
struct MixerNeeds {
  bool top = true, second = true;
};
inline SignalNeeds signal_needs(const MetricSet& selected) {
  const auto any = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
      if (selected[metric_index(n)]) return true;
    return false;
  };
  const bool second = any({"s2"});
  return {second || any({"s1", "sr_cov", "sr_x"}), second, any({"mu", "mu_rel", "res_rel"})};
}
inline MixerNeeds mixer_needs(const MetricSet& selected) {
  const bool gap = selected[metric_index("m_gap")], s2 = selected[metric_index("m_s2")];
  return {gap || s2 || selected[metric_index("m_s1")], gap || s2};
}

}  // namespace rcsweep::metrics
