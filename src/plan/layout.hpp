// Ranks per node x OpenMP threads per rank (`rcsweep plan`, `plan --emit`): the layout of a sweep on
// nodes of given cores and memory. One rank per core (one thread each, no OpenMP overhead) when
// every rank's largest unit fits its share of the node's memory and there are at least as many
// tasks as cores, none of them big; otherwise the layout, of those whose ranks fit in memory, with
// the shortest estimated makespan (plan/schedule.hpp's units, each priced on the rank's threads by
// plan/threads.hpp), ties to fewer threads. Pure: no MPI, no I/O.
#pragma once
#include <string>
#include <vector>

#include "plan/memory.hpp"
#include "plan/plan.hpp"
#include "plan/schedule.hpp"

namespace rcsweep::plan {

/// Of the layouts whose estimated makespan is within this fraction of the shortest, the one with the
/// fewest threads per rank is chosen: the cost model does not price OpenMP's overhead.
inline constexpr double layout_tie = 0.01;

/// What the layout is chosen for (rcsweep plan's options). ConfigError on bad values names them.
struct LayoutRequest {
  int cores_per_node = 1;     ///< --cores
  int nodes = 1;              ///< --nodes (of one job)
  double mem_per_node = 0.0;  ///< bytes of one node (--mem-per-node, default physical memory)
  double mem_per_rank = 0.0;  ///< --mem-per-rank in bytes: every rank's budget; 0: the node's, shared
  std::string memory_source;  ///< where the memory figure comes from, for messages ("--mem-per-rank 4G")
  int threads = 0;            ///< --threads: this many threads per rank; 0: choose
};

/// One layout, estimated.
struct LayoutEstimate {
  int threads = 1;               ///< OpenMP threads per rank
  int ranks_per_node = 1;        ///< cores / threads, at most the tasks
  int ranks = 1;                 ///< ranks of the job: nodes x cores / threads, at most the tasks
  double bytes_per_rank = 0.0;   ///< resident memory of the rank needing the most (plan/memory.hpp)
  double budget_per_rank = 0.0;  ///< mem_per_rank, else mem_per_node / ranks_per_node
  std::size_t largest = 0;       ///< index into plan.bundles of the bundle needing bytes_per_rank
  double makespan_s = 0.0;       ///< estimated wall time
  bool fits() const { return bytes_per_rank <= budget_per_rank; }
};

struct Layout {
  LayoutEstimate chosen;
  std::string reason;                      ///< one line: why this layout
  std::vector<LayoutEstimate> candidates;  ///< every layout weighed, fewest threads first
  Schedule schedule;                       ///< the chosen layout's units, priced on its threads
};

/// Threads per rank a layout may have on nodes of `cores` cores: 1, 2, 4, ... dividing `cores`, and
/// `cores` itself.
std::vector<int> thread_candidates(int cores);

/// make_schedule(work, ranks) with every unit priced on `threads` threads (thread_mode, then
/// unit_seconds; a unit in layer mode only gains from the threads when its largest layer reaches
/// layer_split_min_flops: a lone small task's products are too small to be split), largest first,
/// and its makespan; work_s and bundle_work_s in those prices. `work[i]` prices plan.bundles[i].
/// With threads = 1, make_schedule's schedule itself.
Schedule schedule_on_threads(const Plan& plan, const std::vector<BundleWork>& work, int ranks, int threads);

/// The layout with `threads` threads per rank (1 <= threads <= cores), estimated.
LayoutEstimate estimate_layout(const Plan& plan, const std::vector<BundleWork>& work, const LayoutRequest& request,
                               int threads);

/// Choose the layout (or estimate request.threads's). Throws ConfigError naming --cores, --nodes or
/// --threads on bad values, and --mem-per-rank (when given) or --mem-per-node when no layout's
/// ranks fit in memory.
Layout choose_layout(const Plan& plan, const std::vector<BundleWork>& work, const LayoutRequest& request);

/// The longest task's estimated seconds on `threads` threads, with its bundle's shared work: split
/// over the threads when its bundle's largest layer reaches layer_split_min_flops, else as on one
/// thread (small tasks run concurrently, one per thread: threads.hpp). The shortest a job can take.
double longest_task_seconds(const Plan& plan, const std::vector<BundleWork>& work, int threads);

/// "2 ranks x 1 thread", "1 rank x 4 threads".
std::string describe(const LayoutEstimate& layout);

/// What `ranks` ranks of `threads` OpenMP threads each do to a node of `cores` cores when they are
/// more threads than cores, e.g. "2 ranks x 2 threads = 4 threads on 2 cores: oversubscribed, each
/// thread gets half a core" (the callers prefix "warning: " and say what they do about it). Results
/// are the same on any layout; an oversubscribed one is only slower. "" when the threads fit the
/// cores, or when a count is below 1 (unknown).
std::string oversubscription(int ranks, int threads, int cores);

}  // namespace rcsweep::plan
