// What a run did: rank 0's counts of this run's and the store's tasks, why it stopped, and the
// scheduler's counters (run_sweep returns it; event::Finished carries it).
#pragma once
#include <cstdint>

namespace rcsweep::sweep {

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

}  // namespace rcsweep::sweep
