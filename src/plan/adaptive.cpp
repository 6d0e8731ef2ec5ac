#include "plan/adaptive.hpp"

#include <cmath>
#include <limits>

#include "metrics/metrics.hpp"

namespace rcsweep::plan {

MeanSe mean_se(std::span<const double> values) {
  MeanSe s;
  double sum = 0.0;
  for (const double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++s.n;
    }
  if (s.n == 0) {
    s.mean = std::numeric_limits<double>::quiet_NaN();
    s.se = std::numeric_limits<double>::infinity();
    return s;
  }
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) {
    s.se = std::numeric_limits<double>::infinity();
    return s;
  }
  double squares = 0.0;  // two passes: exact for constant values, unlike sum of squares - n mean^2
  for (const double v : values)
    if (std::isfinite(v)) squares += (v - s.mean) * (v - s.mean);
  const double n = static_cast<double>(s.n);
  s.se = std::sqrt(squares / (n - 1.0) / n);
  return s;
}

bool target_met(const config::ReplicateTarget& target, const MeanSe& s) {
  if (!std::isfinite(s.se)) return false;
  if (target.abs_se > 0.0 && !(s.se <= target.abs_se)) return false;
  if (target.rel_se > 0.0 && !(s.se <= target.rel_se * std::fabs(s.mean))) return false;
  return true;
}

std::vector<double> target_values(const config::AdaptiveReplicates& rule, int max_depth,
                                  const std::vector<metrics::LayerRow>& layers) {
  std::vector<double> out;
  out.reserve(rule.targets.size());
  for (const auto& t : rule.targets) {
    const auto layer = static_cast<std::size_t>(t.layer < 0 ? max_depth : t.layer);
    out.push_back(layer < layers.size() ? layers[layer][metrics::metric_index(t.metric)]
                                        : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

CostRange cost_range(const Plan& plan, std::span<const std::uint64_t> tasks) {
  CostRange c;
  const auto& rule = plan.spec.adaptive;
  for (const auto id : tasks) {
    const auto& t = plan.tasks[id];
    c.max_flops += t.flops;
    ++c.max_tasks;
    if (!rule.enabled() || t.replicate < rule.min) {
      c.min_flops += t.flops;
      ++c.min_tasks;
    }
  }
  return c;
}

ReplicateRule::ReplicateRule(const Plan& plan)
    : rule_(plan.spec.adaptive),
      max_(plan.spec.replicates),
      needed_(plan.points.size(), rule_.enabled() ? rule_.min : max_),
      closed_(plan.points.size(), false),
      state_(plan.tasks.size(), State::unknown),
      values_(plan.tasks.size() * rule_.targets.size(), 0.0) {}

bool ReplicateRule::needed(std::uint64_t id) const {
  const auto p = static_cast<std::size_t>(id / static_cast<std::uint64_t>(max_));
  return static_cast<int>(id % static_cast<std::uint64_t>(max_)) < needed_[p];
}

bool ReplicateRule::not_needed(std::uint64_t id) const {
  return closed_[static_cast<std::size_t>(id / static_cast<std::uint64_t>(max_))] && !needed(id);
}

ReplicateRule::Decisions ReplicateRule::record(std::uint64_t id, std::optional<std::vector<double>> values) {
  const std::size_t n_targets = rule_.targets.size();
  state_[id] = values ? State::known : State::failed;
  if (values)
    for (std::size_t k = 0; k < n_targets && k < values->size(); ++k) values_[id * n_targets + k] = (*values)[k];
  Decisions out;
  if (rule_.enabled()) decide(static_cast<std::size_t>(id / static_cast<std::uint64_t>(max_)), out);
  return out;
}

void ReplicateRule::decide(std::size_t p, Decisions& out) {
  const std::size_t n_targets = rule_.targets.size();
  const std::uint64_t first = static_cast<std::uint64_t>(p) * static_cast<std::uint64_t>(max_);
  std::vector<double> column;
  while (!closed_[p] && needed_[p] < max_) {
    const int k = needed_[p];
    for (int r = 0; r < k; ++r)
      if (state_[first + static_cast<std::uint64_t>(r)] != State::known) return;  // not yet decidable
    bool met = true;
    for (std::size_t j = 0; j < n_targets && met; ++j) {
      column.clear();
      for (int r = 0; r < k; ++r) column.push_back(values_[(first + static_cast<std::uint64_t>(r)) * n_targets + j]);
      // No finite value at all (every replicate diverged before the layer): more replicates of
      // this point would not give one either, so the target asks for none.
      const MeanSe s = mean_se(column);
      met = s.n == 0 || target_met(rule_.targets[j], s);
    }
    if (met) {
      closed_[p] = true;
      for (int r = k; r < max_; ++r) out.not_needed.push_back(first + static_cast<std::uint64_t>(r));
      return;
    }
    needed_[p] = std::min(max_, k + rule_.step);
    for (int r = k; r < needed_[p]; ++r) out.released.push_back(first + static_cast<std::uint64_t>(r));
  }
}

}  // namespace rcsweep::plan
