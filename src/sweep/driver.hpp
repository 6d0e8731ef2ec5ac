// The MPI task farm: every rank computes; units of tasks (bundles, or slices of a bundle when that
// is faster: plan/schedule.hpp) are handed out dynamically, largest first; rank 0 also owns the
// store (one writer, serial HDF5) in a service thread. Its parts: the units (units.hpp,
// work_queue.hpp), rank 0's service (service.hpp) and its adaptive decisions (decisions.hpp),
// the workers (worker.hpp), provenance (provenance.hpp); what happens is reported as events
// (events.hpp).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "models/task_runner.hpp"
#include "plan/cost_model.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "sweep/events.hpp"
#include "sweep/run_summary.hpp"

namespace rcsweep::sweep {

struct RunOptions {
  std::filesystem::path output;
  bool overwrite = false;         ///< replace an existing store
  bool require_existing = false;  ///< --resume: the store must exist
  /// OpenMP threads per rank (base/parallel.hpp): results are bitwise the same for any count.
  int threads = 1;
  int blas_threads = 1;  ///< BLAS threads per OpenMP thread (1: results independent of the layout)
  /// Rank 0 reports what happens (started, progress, tasks that diverged or failed, stops, the end)
  /// to this sink (events.hpp); empty: nothing is reported.
  EventSink events;
  double progress_interval_s = 10.0;  ///< at most one progress event this often (and always a last one)
  double write_interval_s = 0.2;      ///< finished results are written (and flushed) at least this often
  double sync_interval_s = 300.0;     ///< the store is fsync'ed this often (and at the end)
  bool retry_failed = false;          ///< --retry-failed: failed, diverged and vanished tasks are run again
  bool fail_on_diverged = false;      ///< --fail-on-diverged: diverged and vanished tasks make the exit code 3
  /// --reuse: stores whose finished results are copied into the pending tasks they fit
  /// (store/reuse.hpp) before any work.
  std::vector<std::filesystem::path> reuse;
  /// Rank 0 takes a worker for lost (its node or the network failed) when it has heard nothing
  /// from it for this many seconds, or for ten times a layer of its bundle at 1 GFLOP/s if that is
  /// longer; the run then stops as if its launcher were gone (stop.hpp).
  double silence_s = 120.0;
  /// After a stop signal (stop.hpp): running bundles that finish within this many seconds are
  /// kept, the others abandoned (their tasks stay pending).
  double grace_s = 30.0;
  /// --time-limit in seconds (0: none); SLURM_JOB_END_TIME / PBS_WALLTIME also limit the run. No
  /// unit (bundle or slice) is started whose estimated time would overrun the limit.
  double time_limit_s = 0.0;
  /// This machine's measured rates (`rcsweep calibrate`), when stored: the estimates of unit
  /// times for the time limit come from the cost model (plan/cost_model.hpp). Without them, from
  /// the unit's flops at assumed_flop_rate. Either way, once a second of tasks is done, the
  /// estimates are scaled by measured / estimated time of the finished tasks.
  std::optional<plan::Calibration> calibration;
  /// Flop rate per rank assumed for those estimates when no calibration is given.
  double assumed_flop_rate = 18e9;
};

/// Computes the tasks of one bundle, calling `on_done` once per finished task (the contract of
/// models::run_bundle on plan::bundle_job(plan, tasks), the default). The seam lets tests run the scheduler on tasks
/// of synthetic cost; every rank must pass the same function.
using BundleRunner = std::function<void(const plan::Plan&, const std::vector<std::uint64_t>& tasks,
                                        const std::function<void(models::TaskOutput&&)>& on_done,
                                        const std::function<bool()>& cancelled)>;

/// The store could not be opened or created (another plan's store, not a store, exists without
/// --overwrite, ...). Thrown on every rank with the same message, so the caller can exit cleanly.
class StoreRefused : public StoreError {
 public:
  using StoreError::StoreError;
};

/// What run_sweep's rank 0 refuses about the store before any work, checked here without MPI and
/// without writing to it (`rcsweep run -n` before mpiexec starts): the writer lock, taken and let go
/// at once (a holder that is stopping is waited for as run_sweep waits, reported to opt.events);
/// --resume of a missing store; the --reuse stores; a store to resume that is damaged, not a store
/// or of another plan that cannot be grown; a path that cannot be created or replaced (a missing
/// directory, one that takes no new file, --overwrite of a directory). Throws StoreRefused with
/// run_sweep's message. A store that passes may still be refused by the run: another writer may
/// take it in between.
void check_store(const plan::Plan& plan, const RunOptions& opt);

/// Run `plan` into the store at opt.output, collectively on `comm`. Throws StoreRefused (on every
/// rank) when the store cannot be created or belongs to another plan; any other exception is
/// local to the rank that threw it (the caller aborts the job). `runner` computes the bundles
/// (empty: models::run_bundle).
RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, const BundleRunner& runner = {});

}  // namespace rcsweep::sweep
