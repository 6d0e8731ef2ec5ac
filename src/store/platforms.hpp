// /provenance of the store: which platform (BLAS kernel and CPU) computed each task. Internal to
// rcsweep_store (SCHEMA.md "/provenance").
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "store/hdf5.hpp"
#include "store/store.hpp"

namespace rcsweep::store::detail {

/// /provenance/platform (int16 [n_tasks], -1 = not recorded) and the table it indexes, kept in the
/// group's attributes `blas_kernels`, `cpus` and `hosts` (entry i of each, one per line, describes
/// platform i; a store written before `hosts` existed has none: its hosts read as empty). The table
/// only grows: a run on a new platform (or node) appends to it.
class PlatformColumn {
 public:
  /// Create the group and the column (all -1) with an empty table.
  static PlatformColumn create(hid_t file, std::uint64_t n_tasks);
  /// Open it; nullopt-like empty column (exists() false) when the store has none (made by an
  /// older rcsweep).
  static PlatformColumn open(hid_t file, std::uint64_t n_tasks);
  bool exists() const { return static_cast<bool>(column_); }

  /// Write the platforms of the tasks of `runs` (rows in the order of h5::write_rows), appending
  /// new platforms to the table first. An empty Platform writes -1.
  void write(const std::vector<h5::RowRun>& runs, const std::vector<const Platform*>& platforms);
  /// Every task's platform (an empty one where not recorded or when the column does not exist).
  std::vector<Platform> read_all() const;
  /// Tasks per platform among `tasks` whose `counted[t]` is true, in table order (platforms with
  /// no such task left out); tasks not recorded come last as an empty Platform.
  std::vector<std::pair<Platform, std::uint64_t>> count(const std::vector<bool>& counted) const;

 private:
  std::vector<std::int16_t> read_indices() const;
  void save_table() const;
  h5::Handle group_, column_;
  std::uint64_t n_tasks_ = 0;
  std::vector<Platform> table_;
};

}  // namespace rcsweep::store::detail
