// Which tasks a run computes and how they are cut into units of work: the pending tasks (with
// --retry-failed also those that ended early), whole bundles or slices of them where that
// shortens the estimated makespan (plan/schedule.hpp), and the units of replicates that results
// release (adaptive replicates). Pure: no MPI, no I/O.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "plan/adaptive.hpp"
#include "plan/cost_model.hpp"
#include "plan/plan.hpp"
#include "plan/schedule.hpp"
#include "store/store.hpp"
#include "sweep/farm.hpp"
#include "sweep/work_queue.hpp"

namespace rcsweep::sweep {

/// A finished task that ended before the last layer: failed, diverged or vanished (--retry-failed runs them again).
bool ended_early(store::TaskStatus s);

/// Whether this run may compute a task: pending in the store, or (--retry-failed) ended early.
struct Runnable {
  const std::vector<store::TaskStatus>& status;  ///< the store's statuses before the run
  bool retry_failed = false;
  bool operator()(std::uint64_t id) const {
    return status[id] == store::TaskStatus::pending || (retry_failed && ended_early(status[id]));
  }
};

/// A unit's estimated time: from this machine's rates when calibrated (the cost model), else
/// from its flops at `assumed_flop_rate`.
struct UnitPricer {
  const plan::Plan& plan;
  const std::optional<plan::Calibration>& calibration;
  double assumed_flop_rate = 18e9;
  /// The rates the units are cut by (measured, or rough ones).
  plan::Calibration rates() const { return calibration ? *calibration : plan::default_calibration(); }
  /// The unit of `tasks`; `calibrated_s`: its time at the measured rates.
  WorkItem item(TaskList tasks, double calibrated_s) const;
};

/// The work of a run at its start: units largest first, and what they add up to.
struct PendingWork {
  std::vector<plan::BundleWork> bundles;  ///< per bundle with tasks to run: those tasks
  plan::Schedule schedule;                ///< how they are cut into units
  std::deque<WorkItem> units;             ///< the schedule's units, priced
  double flops = 0.0;
  std::uint64_t tasks = 0;
  /// Adaptive replicates: tasks (and their flops) not needed yet that a rule may still need.
  double possible_flops = 0.0;
  std::uint64_t possible_tasks = 0;
  std::uint64_t in_shard = 0;  ///< tasks of the plan's bundles
  /// Tasks of the shard already finished (or decided not needed) before this run.
  std::uint64_t skipped() const { return in_shard - tasks - possible_tasks; }
};

/// The pending work of `plan` for `ranks` ranks; `rule` (adaptive replicates, else null) says
/// which replicates are needed so far.
PendingWork pending_work(const plan::Plan& plan, const Runnable& runnable, const plan::ReplicateRule* rule,
                         const UnitPricer& pricer, int ranks);

/// Released replicates -> units: one per bundle they belong to (tasks of one replicate, T and d
/// share their random tensors wherever they run), tasks in ascending order; tasks this run may
/// not compute are left out.
class ReleasedUnits {
 public:
  ReleasedUnits(const plan::Plan& plan, const Runnable& runnable, const UnitPricer& pricer);
  std::vector<WorkItem> operator()(const TaskList& released) const;

 private:
  const plan::Plan& plan_;
  Runnable runnable_;
  UnitPricer pricer_;
  std::vector<std::size_t> bundle_of_;  // per task: its bundle
};

}  // namespace rcsweep::sweep
