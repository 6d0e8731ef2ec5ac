// What a run reports while it runs: rank 0 gives each event to the sink of RunOptions::events
// (none: nothing is reported). The command line renders them as text on stderr or as one JSON
// object per line (`run --progress json`, docs/EVENTS.md); tests and programs read them as data.
// Events come from rank 0's main thread and its service thread: a sink must be thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <variant>

#include "sweep/run_summary.hpp"

namespace rcsweep::sweep::event {

/// The store is still held by a run that is stopping: this run waits up to `wait_s` for it.
struct WaitingForStore {
  std::string store, holder;  ///< the store's path; the holder as its lock file names it
  double wait_s = 0.0;
};

/// The store was made from another version of the sweep file and has been grown to this one.
struct StoreGrown {
  std::string store;
  std::string changes;  ///< what differs, one line per change (store::describe)
  std::uint64_t copied = 0;
};

/// The store's file system has no flock: one writer per store is not enforced by rcsweep's lock;
/// with HDF5's own file locking off too (HDF5_USE_FILE_LOCKING=FALSE), by nothing.
struct NoFlock {
  std::string store;
  bool hdf5_locking_off = false;
};

/// `--reuse FROM`: finished results copied into this run's pending tasks.
struct Reused {
  std::string from;
  std::uint64_t copied = 0, not_in_sweep = 0, other_shards = 0;
};

/// The ranks use different BLAS kernels, or other ones than the store's finished tasks
/// (results then agree to rounding, not bitwise: docs/GUARANTEES.md).
struct KernelsDiffer {
  std::string this_run;  ///< the kernels of this run's ranks, comma-separated
  std::string stored;    ///< the kernels of the store's finished tasks with their counts ("" when not new)
  bool ranks_differ = false;
  bool new_kernel = false;
};

/// The pending work is counted and handed out from now on.
struct Started {
  std::string store;
  bool resumed = false;
  std::uint64_t tasks = 0;           ///< pending tasks this run computes
  std::uint64_t possible_tasks = 0;  ///< adaptive replicates that may be added as the targets need them
  std::uint64_t bundles = 0;
  int ranks = 1, threads = 1;
  std::uint64_t already_finished = 0;
  std::string schedule;  ///< how the work is cut for the ranks (plan::describe; "" on one rank)
};

/// Something the user should know before the work starts (e.g. ranks that will sit idle).
struct Warning {
  std::string text;
};

/// The share of the work done, cost-weighted (task flops), and the estimated time left.
struct Progress {
  std::uint64_t tasks_done = 0, tasks_total = 0;
  double fraction = 0.0;      ///< of the work, 0..1
  double elapsed_s = 0.0;     ///< since the work started
  double eta_s = -1.0;        ///< estimated seconds left (-1: unknown)
  bool eta_is_bound = false;  ///< adaptive replicates may not all run: the ETA is an upper bound
  bool last = false;          ///< the last progress event of the run
};

/// A task ended other than done: diverged, vanished (outcomes of the stack) or failed (an error).
struct TaskEnded {
  std::uint64_t task = 0;
  std::string status;   ///< "diverged", "vanished" or "failed" (docs/SCHEMA.md status names)
  std::string message;  ///< as recorded in /tasks/message
};

/// Rank 0's own loop was held up (the job stopped, the machine paused, a slow write): the workers'
/// silence meanwhile is not counted.
struct Paused {
  double seconds = 0.0;
};

/// A stop signal: no new tasks; running bundles that finish within `grace_s` are kept.
struct Stopping {
  std::string signal;    ///< its name ("SIGTERM")
  std::string launcher;  ///< the launcher that sent it, when it kills the job next ("" otherwise)
  double grace_s = 0.0;
  std::string stops_at_once;  ///< what stops the run at once ("" when the launcher sent it)
};

/// The launcher (mpiexec, srun) is gone: the run stops now, finished tasks are kept.
struct LauncherGone {
  std::string launcher;
};

/// A worker has not been heard from: its node or the network failed; the run stops now.
struct RankLost {
  int rank = 0;
  std::string host;
  double silent_s = 0.0;
};

/// The run ended (completely, or stopped early: summary.exit_code() == 4).
struct Finished {
  std::string store;
  RunSummary summary;
};

/// `--dump-weights`: the tapes of the done tasks were written into the store's /dump.
struct WeightsDumped {
  std::uint64_t tasks = 0, bytes = 0;
  std::uint64_t not_done = 0;  ///< tasks of the sweep without a dump (not done)
};

}  // namespace rcsweep::sweep::event

namespace rcsweep::sweep {

using Event =
    std::variant<event::WaitingForStore, event::StoreGrown, event::NoFlock, event::Reused, event::KernelsDiffer,
                 event::Started, event::Warning, event::Progress, event::TaskEnded, event::Paused, event::Stopping,
                 event::LauncherGone, event::RankLost, event::Finished, event::WeightsDumped>;

/// Receives the events of a run (rank 0 only); must be thread-safe.
using EventSink = std::function<void(const Event&)>;

/// The event's name as `--progress json` writes it ("started", "progress", "task_ended", ...).
const char* event_name(const Event& e);

/// Give `e` to `sink`, if there is one.
inline void report(const EventSink& sink, const Event& e) {
  if (sink) sink(e);
}

}  // namespace rcsweep::sweep
