// The weights dump of `rcsweep run --dump-weights` (SCHEMA.md "/dump"): for each finished task,
// every layer's signal X_l and every weight and mixer matrix as the forward pass used them, so an
// independent script (scripts/rcsweep_recompute.py) can recompute X_l and the metrics.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "plan/plan.hpp"

namespace rcsweep::store {

/// Largest dump `rcsweep run --dump-weights` accepts (bytes; dump_bytes of the run's tasks).
inline constexpr std::uint64_t dump_limit_bytes = std::uint64_t{256} << 20;

/// Estimated size in bytes of the dump of `tasks` (ids of `plan`), from T, d, d_qk, heads,
/// state_dim, mlp_ratio and plan.max_depth: 8 bytes per stored value plus a fixed allowance per
/// group and dataset. Exact in the values, since every task runs to plan.max_depth; a diverged
/// task, which gets no dump, is counted as if it finished.
std::uint64_t dump_bytes(const plan::Plan& plan, const std::vector<std::uint64_t>& tasks);

struct DumpSummary {
  std::uint64_t written = 0;  ///< tasks dumped
  std::uint64_t skipped = 0;  ///< tasks not done in the store (diverged, failed, pending): no dump
  std::uint64_t bytes = 0;    ///< values written, in bytes (8 per float64)
};

/// Write /dump/task_<id> into the existing store at `path` for every task of `tasks` whose /tasks
/// status is done: the taped forward pass of the task alone (models::record_task, bitwise the
/// X_l of the sweep) gives X_0..X_L and each layer's weights. An existing /dump group is replaced.
/// Serial; call on one process after the sweep has closed the store. Throws StoreError when the
/// store cannot be opened or written, or rcsweep::Error when a task's tape does not match the
/// store (e.g. a plan other than the store's).
DumpSummary write_dump(const std::filesystem::path& path, const plan::Plan& plan,
                       const std::vector<std::uint64_t>& tasks);

}  // namespace rcsweep::store
