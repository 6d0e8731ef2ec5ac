// Which finished tasks of one plan are tasks of another: a sweep that grows (more replicates, more
// axis values, more zip entries, another depth label) keeps the results it already has. Pure: no
// I/O. The store copies the matched results (store/reuse.hpp).
//
// A task's numbers depend only on its full parameter vector, its replicate, the sweep seed, the
// largest depth L_max (every task runs to it) and what is stored of it ([output], matrices and
// input files): never on the grid around it (MODELS.md "Randomness": keyed streams; bundle
// composition is bitwise invisible, tested). So two tasks match when the global settings agree
// and their (parameter vector, replicate) are equal, whatever their task ids.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/sweep_spec.hpp"
#include "plan/plan.hpp"

namespace rcsweep::plan {

/// The differences between two sweeps, one line per key of their canonical text, as
/// "key: old -> new" ("(absent)" where a side has no such key), in the order of the keys'
/// first appearance: e.g. "sweep.replicates: 8 -> 16", "axes.lambda: [0.0, 0.5] -> [0.0, 0.5, 1.0]".
/// Empty when the sweeps are the same (equal plan hashes).
std::vector<std::string> config_differences(const config::SweepSpec& from, const config::SweepSpec& to);

struct TaskMatch {
  /// (task id in `from`, task id in `to`) of every task of `from` that is a task of `to`,
  /// ascending in the first.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs;
  /// Tasks of `from` whose parameters are those of a task of `to`, but whose attention logits take
  /// the other order of products there (chosen from the whole grid, plan.cpp choose_qk_product):
  /// their results would agree to rounding only, so they are computed again. Ascending.
  std::vector<std::uint64_t> rerouted;
  /// Differences that change every task's results (seed, L_max, [output], matrices, input file):
  /// nothing matches when this is not empty. Same format as config_differences.
  std::vector<std::string> blockers;
};

/// The tasks of `from` whose results are, bitwise, those of a task of `to`.
TaskMatch match_tasks(const Plan& from, const Plan& to);

}  // namespace rcsweep::plan
