// Adaptive replicates ([sweep.replicates] min/max/step/targets, config::AdaptiveReplicates): which
// replicates of each point run. Pure: no MPI, no I/O.
//
// Every point first needs replicates 0..min-1. Once its first k replicates (k = min, min + step,
// ...) are all finished, the decision is taken from their values alone, in replicate order: when
// every target's standard error is within bounds, replicates k..max-1 are not needed; else the
// next step of them (k..k+step-1, at most up to max) is. A target none of whose k values is finite
// (every replicate diverged before its layer) asks for no more. So the tasks that run, and every
// number stored, do not depend on the rank count, the layout, the timing or kills and resumes.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "metrics/metrics.hpp"
#include "plan/plan.hpp"

namespace rcsweep::plan {

/// Mean and standard error of the mean (sample sd with n - 1, over sqrt(n)) of the finite
/// values, summed in their order. se is +inf when fewer than 2 values are finite.
struct MeanSe {
  double mean = 0.0, se = 0.0;
  std::size_t n = 0;
};
MeanSe mean_se(std::span<const double> values);

/// Whether `s` meets `target` (se <= abs_se and se <= rel_se * |mean|, each when given).
bool target_met(const config::ReplicateTarget& target, const MeanSe& s);

/// The values a task's targets are decided on: target k's metric at its layer (-1: the last)
/// from a result's layers (NaN when the task has no such layer, e.g. it diverged before it).
std::vector<double> target_values(const config::AdaptiveReplicates& rule, int max_depth,
                                  const std::vector<metrics::LayerRow>& layers);

/// Smallest and largest total flops of the tasks `tasks` may run: every point at min, or at max
/// replicates. For a plan without a rule both are the tasks' flops.
struct CostRange {
  double min_flops = 0.0, max_flops = 0.0;
  std::uint64_t min_tasks = 0, max_tasks = 0;
};
CostRange cost_range(const Plan& plan, std::span<const std::uint64_t> tasks);

/// The decisions of one adaptive plan as results come in (rank 0 of a run).
class ReplicateRule {
 public:
  explicit ReplicateRule(const Plan& plan);

  /// Whether task `id` is needed now (its replicate is below its point's current count).
  bool needed(std::uint64_t id) const;
  /// Whether task `id` was decided not needed.
  bool not_needed(std::uint64_t id) const;

  struct Decisions {
    std::vector<std::uint64_t> released;    ///< tasks needed from now on (ascending)
    std::vector<std::uint64_t> not_needed;  ///< tasks never needed (ascending)
  };
  /// Task `id` finished: `values` are its target_values, or nothing when it failed (a failed
  /// replicate holds its point's decision until it is run again). Returns what this made
  /// decidable (decisions cascade when later replicates were already known, as on a resume).
  Decisions record(std::uint64_t id, std::optional<std::vector<double>> values);

  /// Replicates point `p` needs so far.
  int needed_count(std::size_t p) const { return needed_[p]; }

 private:
  enum class State : std::uint8_t { unknown, known, failed };
  void decide(std::size_t p, Decisions& out);

  const config::AdaptiveReplicates& rule_;
  int max_ = 0;
  std::vector<int> needed_;     // per point: replicates needed so far
  std::vector<bool> closed_;    // per point: the rest was decided not needed
  std::vector<State> state_;    // per task
  std::vector<double> values_;  // per task x target
};

}  // namespace rcsweep::plan
