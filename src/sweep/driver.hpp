// The MPI task farm: every rank computes; bundles of tasks are handed out dynamically, largest
// first; rank 0 also owns the store (one writer, serial HDF5) in a service thread.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <filesystem>

#include "base/error.hpp"
#include "plan/plan.hpp"

namespace rcsweep::sweep {

struct RunOptions {
  std::filesystem::path output;
  bool overwrite = false;       ///< replace an existing store
  bool require_existing = false;  ///< --resume: the store must exist
  int blas_threads = 1;         ///< BLAS threads per task (1: results independent of the layout)
  bool progress = true;         ///< progress and ETA on rank 0's stderr
  double write_interval_s = 0.2;  ///< finished results are written (and flushed) at least this often
  double sync_interval_s = 300.0;  ///< the store is fsync'ed this often (and at the end)
};

struct RunSummary {
  std::uint64_t total = 0;         ///< tasks in the plan
  std::uint64_t skipped = 0;       ///< already finished in the store before this run
  std::uint64_t done = 0, failed = 0, diverged = 0;  ///< finished by this run
  double wall_s = 0.0;
  bool resumed = false;
  /// 0 when every task of the store is done, 3 when some failed or diverged.
  int exit_code() const;
  std::uint64_t store_failed = 0, store_diverged = 0;  ///< over the whole store after the run
};

/// The store could not be opened or created (another plan's store, not a store, exists without
/// --overwrite, ...). Thrown on every rank with the same message, so the caller can exit cleanly.
class StoreRefused : public StoreError {
 public:
  using StoreError::StoreError;
};

/// Run `plan` into the store at opt.output, collectively on `comm`. Throws StoreRefused (on every
/// rank) when the store cannot be created or belongs to another plan; any other exception is
/// local to the rank that threw it (the caller aborts the job).
RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm);

}  // namespace rcsweep::sweep
