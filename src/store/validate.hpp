// The schema check every reader of a store makes before it reads anything else (docs/SCHEMA.md
// "What a store must be"): the store's own objects, its root attributes, the sweep description
// kept in it (the `config` attribute), /axes and /points. The Python loader
// (scripts/rcsweep_tools/load.py, check_store) makes the same checks in the same order with the
// same reasons. Private to src/store.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "config/sweep_spec.hpp"

namespace rcsweep::store {

/// Longest value of a short text attribute (plan_hash, created, host, blas, sweep_name, /axes
/// order, dim, ...), in bytes.
inline constexpr std::size_t max_short_text_bytes = 4096;
/// Longest value of the long text attributes (config, overrides, reused), in bytes: the canonical
/// text of the largest sweep file with its inline matrices.
inline constexpr std::size_t max_long_text_bytes = std::size_t{64} << 20;
/// /points rows read at a time by the check.
inline constexpr std::size_t points_block_rows = 4096;

/// What the checked description of a store says: the stored sweep (parsed from `config`) and the
/// counts its root attributes give, all consistent with each other.
struct StoreLayout {
  config::SweepSpec spec;
  std::uint64_t n_tasks = 0, n_points = 0;
  int max_depth = 0;
  int replicates = 1;
};

/// Throw StoreError unless every object of `file` is its own: reached by hard links only (a soft
/// or external link is named with its target) and holding its values inside the file (no
/// external storage, no virtual dataset; every stored block within the file and of the size its
/// values need).
void check_objects(hid_t file);

/// Throw StoreError (the reason, without the path) unless the description of the store `file`
/// (identity already checked) is what docs/SCHEMA.md says, in this order:
///  1. the root attributes: each scalar, of its class (text or integer), texts valid UTF-8 of at
///     most max_short_text_bytes (config, overrides, reused: max_long_text_bytes), counts in
///     their range; plan_hash, config, replicates, max_depth, n_points, n_tasks, mpi_ranks,
///     threads required;
///  2. the stored sweep: plan_hash is 16 hex digits, the FNV-1a hash of `config`, which parses as
///     a sweep file whose replicates, points, tasks, depth, seed and name are the attributes';
///  then check_objects, before any object below the root is opened;
///  3. /axes: attribute `order` names the stored sweep's axes in its order; each axis a 1-D
///     dataset of the sweep's length (checked before reading), of the type the writer gives it
///     (int64, float64 or a UTF-8 string), with attribute `dim`, holding the sweep's values;
///     /axes/layer int64 0..max_depth;
///  4. /points: a compound table of n_points rows whose fields are model parameters of their
///     registry type and idx_<dim> (int64) for every grid dimension; each row's indices are its
///     row-major grid position and its values the stored sweep's point (read in blocks of
///     points_block_rows rows).
/// Never allocates from a size the file gives before checking it against the stored sweep.
StoreLayout check_description(hid_t file);

/// Throw StoreError unless /tasks row i has id i, point i / replicates and replicate
/// i % replicates (readers index the grid with them). `tasks` is a checked task table of n_tasks
/// rows.
void check_task_ids(hid_t tasks, std::uint64_t n_tasks, int replicates);

}  // namespace rcsweep::store
