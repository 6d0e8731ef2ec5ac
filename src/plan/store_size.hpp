// A store's layout on disk and its size: how the per-task result datasets are chunked and when
// their storage is allocated, and what the file takes once some tasks have run. Pure: no I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "plan/plan.hpp"

namespace rcsweep::plan {

/// How the store of a plan keeps its per-task results (/layers, /theory, /grad, the spectra).
struct StoreLayout {
  /// Storage allocated chunk by chunk as tasks finish (a sweep with adaptive replicates, or a run
  /// of one shard: not every task of the store runs), instead of all of it when the store is
  /// created (a sweep that runs every task: a full disk then shows at creation).
  bool by_task = false;
  std::uint64_t task_rows = 1;              ///< tasks (rows) per chunk of /layers, /theory and /grad
  std::uint64_t theory_rows = 1;            ///< tasks per chunk of /theory
  std::uint64_t sv_chunk = 1, m_chunk = 1;  ///< values per chunk of /spectra/x_sv, and of m_sv, m_eig_re, m_eig_im
};

/// The layout of the store of `plan`. Allocated at creation: /layers chunks of up to 64 rows (at
/// most 1 MiB), /theory of up to 65536. Allocated by task: an adaptive sweep's chunks hold `step`
/// tasks, so a point takes the chunks of the replicates it ran; a shard of a sweep without
/// adaptive replicates (tasks id = shard (mod n)) one task per chunk; in both at most 64 tasks and
/// at least n_tasks / 4096 (the readers look up every chunk of a store when they check it).
StoreLayout store_layout(const Plan& plan);

/// Tasks per chunk of /grad/<name> (`dims` the dataset's dimensions, n_tasks first).
std::uint64_t grad_chunk_rows(const StoreLayout& layout, const std::vector<std::uint64_t>& dims);

/// Estimated bytes of the store of `plan` (its file on disk) once the tasks `ran` (ran[id], one
/// per task of the plan) have finished: every table written at creation, the per-task results
/// (all of them when allocated at creation, else the chunks the tasks that ran fill) and the HDF5
/// structure that indexes them.
double store_bytes(const Plan& plan, const std::vector<bool>& ran);

/// The store's size before and after the run of the plan (or of its shard): `least` with only the
/// tasks every point runs (with adaptive replicates: the first `min` replicates of each point),
/// `most` with every task of the plan's bundles. Equal without adaptive replicates.
struct StoreSize {
  double least = 0.0, most = 0.0;
};
StoreSize store_size(const Plan& plan);

}  // namespace rcsweep::plan
