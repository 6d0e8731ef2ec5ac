// The MPI task farm: every rank computes; units of tasks (bundles, or slices of a bundle when that
// is faster: plan/schedule.hpp) are handed out dynamically, largest first; rank 0 also owns the
// store (one writer, serial HDF5) in a service thread. Its parts: the units (units.hpp,
// work_queue.hpp), rank 0's service (service.hpp) and its adaptive decisions (decisions.hpp),
// the workers (worker.hpp), provenance (provenance.hpp) and the messages on stderr (notices.hpp).
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

namespace rcsweep::sweep {

struct RunOptions {
  std::filesystem::path output;
  bool overwrite = false;         ///< replace an existing store
  bool require_existing = false;  ///< --resume: the store must exist
  /// OpenMP threads per rank (base/parallel.hpp): results are bitwise the same for any count.
  int threads = 1;
  int blas_threads = 1;            ///< BLAS threads per OpenMP thread (1: results independent of the layout)
  bool progress = true;            ///< progress and ETA on rank 0's stderr
  double write_interval_s = 0.2;   ///< finished results are written (and flushed) at least this often
  double sync_interval_s = 300.0;  ///< the store is fsync'ed this often (and at the end)
  bool retry_failed = false;       ///< --retry-failed: failed, diverged and vanished tasks are run again
  bool fail_on_diverged = false;   ///< --fail-on-diverged: diverged and vanished tasks make the exit code 3
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

struct RunSummary {
  std::uint64_t total = 0;                                         ///< tasks in the plan
  std::uint64_t skipped = 0;                                       ///< already finished in the store before this run
  std::uint64_t done = 0, failed = 0, diverged = 0, vanished = 0;  ///< finished by this run
  std::uint64_t not_needed = 0;  ///< replicates this run decided not to run (adaptive)
  double wall_s = 0.0;
  bool resumed = false;
  /// 0 when every task of the store ran to an outcome (done, diverged or vanished), 3 when some
  /// failed (or, with fail_on_diverged, some diverged or vanished), 4 when the run stopped early
  /// (signal or time limit) with tasks left (resumable).
  int exit_code() const;
  bool fail_on_diverged = false;  ///< RunOptions::fail_on_diverged
  /// The layers at which this run's diverged and vanished tasks ended, lowest and highest (-1: none).
  int ended_first_layer = -1, ended_last_layer = -1;
  std::uint64_t store_failed = 0, store_diverged = 0, store_vanished = 0;  ///< over the whole store after the run
  std::uint64_t store_pending = 0;  ///< tasks of this run's shard still pending after the run
  int stop_signal = 0;              ///< the signal that stopped the run early (0: none)
  /// The launcher (mpiexec) died and the run stopped at once (stop.hpp). Each rank then ends on
  /// its own: workers do not know the store (store_pending is 1) and must exit without MPI_Finalize.
  bool launcher_gone = false;
  bool time_limited = false;  ///< the time limit stopped the run early
  int lost_rank = -1;         ///< rank 0: the worker whose silence stopped the run (-1: none)
  double time_limit_s = 0.0;  ///< the limit in effect (seconds from the start; 0: none)
  /// Scheduler counters of this rank (docs/SCALING.md; not shared between ranks). Rank 0's
  /// writer: time spent in Store::write, batches written, the largest batch, and the longest a
  /// result waited at rank 0 between its arrival and the end of its write. Every rank: units it
  /// computed, and (workers) the time spent waiting for the next unit (or the stop) after
  /// sending a unit's results, in all and at most.
  double write_s = 0.0;
  std::uint64_t write_batches = 0, max_batch = 0;
  double max_write_latency_s = 0.0;
  std::uint64_t bundles = 0;  ///< units computed (a bundle or a slice of one)
  std::uint64_t units = 0;    ///< rank 0: units the pending work was cut into
  double wait_s = 0.0, max_wait_s = 0.0;
};

/// Computes the tasks of one bundle, calling `on_done` once per finished task (the signature and
/// contract of models::run_bundle, the default). The seam lets tests run the scheduler on tasks
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

/// Run `plan` into the store at opt.output, collectively on `comm`. Throws StoreRefused (on every
/// rank) when the store cannot be created or belongs to another plan; any other exception is
/// local to the rank that threw it (the caller aborts the job). `runner` computes the bundles
/// (empty: models::run_bundle).
RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, const BundleRunner& runner = {});

}  // namespace rcsweep::sweep
