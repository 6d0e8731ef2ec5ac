// Adaptive replicates at rank 0: the decisions written results allow (which replicates are
// released, which are not needed), and their replay from a store's finished tasks on a resume.
// decide() is pure; replay_decisions reads and writes the store.
#pragma once
#include <cstdint>
#include <vector>

#include "plan/adaptive.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "sweep/farm.hpp"

namespace rcsweep::sweep {

/// The stored form of a replicate an adaptive rule does not need: status only, no values.
store::TaskResult not_needed_result(std::uint64_t id);

/// A finished result told to the adaptive rule: its targets' values, or nothing when it failed.
plan::ReplicateRule::Decisions record_result(plan::ReplicateRule& rule, const plan::Plan& plan,
                                             const store::TaskResult& r);

/// What a batch of results decided.
struct Decided {
  TaskList released;                          ///< replicates needed from now on
  std::vector<store::TaskResult> not_needed;  ///< to record: replicates not needed, pending at the start
};
/// Tell `rule` the results of `batch`. Replicates decided not needed are recorded as such only
/// when they were pending in the store at the start (`status_at_start`): a result copied from
/// another store stays.
Decided decide(plan::ReplicateRule& rule, const plan::Plan& plan, const std::vector<store::TaskStatus>& status_at_start,
               const std::vector<store::TaskResult>& batch);

/// The tasks whose stored results the decisions are replayed from: those of the plan's bundles
/// that are done, or ended early unless `retry_failed` runs them again; ascending.
TaskList replayed_tasks(const plan::Plan& plan, const std::vector<store::TaskStatus>& status, bool retry_failed);

/// The decisions that the store's finished tasks allow (those of earlier runs, taken again: they
/// depend on the results only). Replicates decided not needed but still pending in the store (a
/// run stopped between a decision and its write) are recorded now.
plan::ReplicateRule replay_decisions(const plan::Plan& plan, store::Store& store,
                                     const std::vector<store::TaskStatus>& status, bool retry_failed);

}  // namespace rcsweep::sweep
