// How a rank's OpenMP threads share a unit of work (rcsweep run --threads N). Either the unit's
// tasks run concurrently, one per thread (small tasks: every product is too small to be worth
// splitting), or its tasks run one after the other with each layer's products, entrywise maps and
// metric passes split over all threads (big tasks). Both give bitwise the same results: every
// split is a fixed partition of the work that depends on the shapes only, never on the thread
// count (base/parallel.hpp), so the choice is one of speed and memory only. Pure: no MPI, no I/O.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace rcsweep::plan {

enum class ThreadMode {
  tasks,  ///< the unit's tasks run concurrently, one per thread, layer by layer
  layer,  ///< one task at a time, each layer split over the threads
};

/// From this estimated layer cost on (flops of one layer of one task, plan::layer_flops) a task's
/// layer is split over the threads rather than run beside the others'. Below it the unit's tasks
/// run concurrently (when there are at least two).
inline constexpr double layer_split_min_flops = 2e9;

/// The mode of a unit of `tasks` (one bundle's, or a slice of one) on `threads` threads.
ThreadMode thread_mode(const Plan& plan, const std::vector<std::uint64_t>& tasks, int threads);

/// The order in which the threads take a unit's tasks in tasks mode (indices into `tasks`). Tasks of
/// one mixer share what the first of them builds (W_Q W_K^T for attention, the Markov draws) and
/// the others wait for it: so first one task of each mixer (the mixers by their tasks' total cost,
/// most first), then the rest of each mixer's tasks, the mixers in the reverse order. While one
/// thread builds the costliest shared product, the others work on tasks that do not need it. Within
/// a mixer, the longest tasks first (by plan::layer_flops).
std::vector<std::size_t> task_order(const Plan& plan, const std::vector<std::uint64_t>& tasks);

/// The bundle with the largest working set on `threads` threads (unit_bytes in its thread_mode):
/// its index in plan.bundles and its bytes ({0, 0} without bundles).
struct LargestBundle {
  std::size_t index = 0;
  std::size_t bytes = 0;
};
LargestBundle largest_bundle(const Plan& plan, int threads);

/// "tasks" or "layer".
std::string to_string(ThreadMode mode);

/// Estimated seconds of a unit on `threads` threads, from its seconds on one thread (the unit's
/// task seconds, each task's share of the shared work included, as plan/schedule.hpp prices them):
/// tasks mode: the longest-task-first hand-out of its tasks to the threads (shared work runs
/// once, by the first task asking for it), layer mode: the sum divided by the threads.
double unit_seconds(ThreadMode mode, const std::vector<double>& task_s, double shared_s, int threads);

/// Peak working set of a bundle's unit on `threads` threads: tasks mode holds up to min(threads,
/// tasks) tasks' layer temporaries at once, layer mode one task's (the bundle's scratch_bytes).
std::size_t unit_bytes(const Bundle& bundle, ThreadMode mode, int threads, std::size_t tasks);

}  // namespace rcsweep::plan
