// The units of work rank 0 hands out (src/sweep/units.cpp): whole bundles, or slices of a bundle
// when there are fewer bundles than ranks or the last bundles would leave ranks idle. A slice
// repeats its bundle's shared work (the random weights, shared mixers, layer 0 and 1 on X_0: each
// rank draws them itself, bitwise the same), so a bundle is split only where the estimated makespan
// of the largest-first hand-out, that repeated work included, gets shorter. Pure: no MPI, no I/O.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rcsweep::plan {

/// A bundle's pending tasks priced apart (cost_model.hpp, bundle_work): a unit holding some of
/// them takes the sum of their task_s plus shared_s, the work it shares among them.
struct BundleWork {
  std::vector<std::uint64_t> tasks;  ///< task ids, in bundle order
  std::vector<double> task_s;        ///< each task's own estimated seconds
  double shared_s = 0.0;             ///< seconds of the shared work, once per unit
  double seconds() const;            ///< the whole bundle as one unit
};

/// Tasks of one bundle handed out together.
struct WorkUnit {
  std::vector<std::uint64_t> tasks;
  std::size_t bundle = 0;  ///< index of its bundle in make_schedule's input
  double seconds = 0.0;    ///< estimated seconds on one rank
};

struct Schedule {
  std::vector<WorkUnit> units;  ///< largest first: the hand-out order
  int ranks = 1;
  std::size_t bundles = 0;        ///< bundles with pending tasks
  std::size_t split_bundles = 0;  ///< of which cut into slices
  std::size_t tasks = 0;
  double bundle_work_s = 0.0;  ///< the work as whole bundles
  double work_s = 0.0;         ///< the units' work: bundle_work_s + the shared work the slices repeat
  double makespan_s = 0.0;     ///< of the largest-first hand-out of the units to `ranks` ranks
  /// Fraction of the ranks' time spent computing until the makespan: work_s / (ranks x makespan_s).
  double utilisation() const;
};

/// Makespan of handing out units of these seconds, in this order, each to the rank free first.
double hand_out_makespan(const std::vector<double>& seconds, int ranks);

/// Cut `bundles` into units for `ranks` ranks. Starting from whole bundles, the bundle holding the
/// largest unit is cut into more slices (contiguous runs of its tasks of about equal estimated
/// time) while that can shorten the makespan; the shortest makespan found wins (ties: the fewest
/// slices). Then, while the slices repeat under 2 % of the work, up to 4 units per rank, within
/// 1 % of that makespan (slack for a rank slowed by what the model does not see). Every task of `bundles` is in exactly one unit, no unit is empty, and a unit's tasks
/// belong to one bundle, in bundle order.
Schedule make_schedule(const std::vector<BundleWork>& bundles, int ranks);

/// The fewest ranks whose schedule is at most `slower` (a fraction) slower than that of `ranks`,
/// found by bisection (as if the makespan never grew with the number of ranks).
int fewest_ranks(const std::vector<BundleWork>& bundles, int ranks, double slower);

/// "expected utilisation 97% (units: 8 slices of 1 bundle)", and what the slices repeat ("nothing
/// to run" without units).
std::string describe(const Schedule& s);

/// Why ranks would idle under `s` and what to do ("" when at least `min_utilisation` of their
/// time is expected busy and every rank has a task). `bundles` as given to make_schedule.
std::string idle_warning(const Schedule& s, const std::vector<BundleWork>& bundles, double min_utilisation = 0.8);

}  // namespace rcsweep::plan
