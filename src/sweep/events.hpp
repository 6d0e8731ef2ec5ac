// What a run reports while it runs: rank 0 gives each event to the sink of RunOptions::events
// (none: nothing is reported; the library itself prints nothing). The command line renders them
// as text on stderr or as one JSON object per line (`run --progress json`, docs/EVENTS.md); tests
// and programs read them as data. Events come from rank 0's main thread (which also computes)
// and its service thread: a sink must be thread-safe.
//
// Every kind of event is a struct with its `name` (as `--progress json` writes it) and
// `fields(f)`, which gives each of its JSON fields to `f` as (key, value) in the order written
// (docs/EVENTS.md's table lists them; a unit test holds the two together). A kind without them
// does not compile (event::Kind below); the command line's text of each kind is one overload per
// kind without a generic fallback (cli/run_events.cpp), so a kind without its text does not
// compile either. Adding a kind: its struct here, in Event, its text there, its row in the table.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>

#include "sweep/run_summary.hpp"

namespace rcsweep::sweep::event {

/// Why a run stopped early, as the `finished` event says it ("" when it did not stop early).
std::string stopped_because(const RunSummary& s);

/// The store is still held by a run that is stopping: this run waits up to `wait_s` for it.
struct WaitingForStore {
  static constexpr const char* name = "waiting_for_store";
  std::string store, holder;  ///< the store's path; the holder as its lock file names it
  double wait_s = 0.0;
  template <typename F>
  void fields(F&& f) const {
    f("store", store);
    f("holder", holder);
    f("wait_s", wait_s);
  }
};

/// The store was made from another version of the sweep file and has been grown to this one.
struct StoreGrown {
  static constexpr const char* name = "store_grown";
  std::string store;
  std::string changes;  ///< what differs, one line per change (store::describe)
  std::uint64_t copied = 0;
  template <typename F>
  void fields(F&& f) const {
    f("store", store);
    f("changes", changes);
    f("copied", copied);
  }
};

/// The store's file system has no flock: one writer per store is not enforced by rcsweep's lock;
/// with HDF5's own file locking off too (HDF5_USE_FILE_LOCKING=FALSE), by nothing.
struct NoFlock {
  static constexpr const char* name = "no_flock";
  std::string store;
  bool hdf5_locking_off = false;
  template <typename F>
  void fields(F&& f) const {
    f("store", store);
    f("hdf5_locking_off", hdf5_locking_off);
  }
};

/// `--reuse FROM`: finished results copied into this run's pending tasks.
struct Reused {
  static constexpr const char* name = "reused";
  std::string from;
  std::uint64_t copied = 0, not_in_sweep = 0, other_shards = 0;
  template <typename F>
  void fields(F&& f) const {
    f("from", from);
    f("copied", copied);
    f("not_in_sweep", not_in_sweep);
    f("other_shards", other_shards);
  }
};

/// The ranks use different BLAS kernels, or other ones than the store's finished tasks
/// (results then agree to rounding, not bitwise: docs/GUARANTEES.md).
struct KernelsDiffer {
  static constexpr const char* name = "kernels_differ";
  std::string this_run;  ///< the kernels of this run's ranks, comma-separated
  std::string stored;    ///< the kernels of the store's finished tasks with their counts ("" when not new)
  bool ranks_differ = false;
  bool new_kernel = false;
  template <typename F>
  void fields(F&& f) const {
    f("this_run", this_run);
    f("stored", stored);
    f("ranks_differ", ranks_differ);
    f("new_kernel", new_kernel);
  }
};

/// The pending work is counted and handed out from now on.
struct Started {
  static constexpr const char* name = "started";
  std::string store;
  bool resumed = false;
  std::uint64_t tasks = 0;           ///< pending tasks this run computes
  std::uint64_t possible_tasks = 0;  ///< adaptive replicates that may be added as the targets need them
  std::uint64_t bundles = 0;
  int ranks = 1, threads = 1;
  std::uint64_t already_finished = 0;
  std::string schedule;  ///< how the work is cut for the ranks (plan::describe; "" on one rank)
  template <typename F>
  void fields(F&& f) const {
    f("store", store);
    f("resumed", resumed);
    f("tasks", tasks);
    f("possible_tasks", possible_tasks);
    f("bundles", bundles);
    f("ranks", ranks);
    f("threads", threads);
    f("already_finished", already_finished);
    f("schedule", schedule);
  }
};

/// Something the user should know before the work starts (e.g. ranks that will sit idle).
struct Warning {
  static constexpr const char* name = "warning";
  std::string text;
  template <typename F>
  void fields(F&& f) const {
    f("text", text);
  }
};

/// The share of the work done, cost-weighted (task flops), and the estimated time left.
struct Progress {
  static constexpr const char* name = "progress";
  std::uint64_t tasks_done = 0, tasks_total = 0;
  double fraction = 0.0;      ///< of the work, 0..1
  double elapsed_s = 0.0;     ///< since the work started
  double eta_s = -1.0;        ///< estimated seconds left (-1: unknown)
  bool eta_is_bound = false;  ///< adaptive replicates may not all run: the ETA is an upper bound
  bool last = false;          ///< the last progress event of the run
  template <typename F>
  void fields(F&& f) const {
    f("tasks_done", tasks_done);
    f("tasks_total", tasks_total);
    f("fraction", fraction);
    f("elapsed_s", elapsed_s);
    f("eta_s", eta_s < 0 ? std::numeric_limits<double>::quiet_NaN() : eta_s);  // NaN: unknown
    f("eta_is_bound", eta_is_bound);
    f("last", last);
  }
};

/// A task ended other than done: diverged, vanished (outcomes of the stack) or failed (an error).
struct TaskEnded {
  static constexpr const char* name = "task_ended";
  std::uint64_t task = 0;
  std::string status;   ///< "diverged", "vanished" or "failed" (docs/SCHEMA.md status names)
  std::string message;  ///< as recorded in /tasks/message
  template <typename F>
  void fields(F&& f) const {
    f("task", task);
    f("status", status);
    f("message", message);
  }
};

/// Rank 0's own loop was held up (the job stopped, the machine paused, a slow write): the workers'
/// silence meanwhile is not counted.
struct Paused {
  static constexpr const char* name = "paused";
  double seconds = 0.0;
  template <typename F>
  void fields(F&& f) const {
    f("seconds", seconds);
  }
};

/// A stop signal: no new tasks; running bundles that finish within `grace_s` are kept.
struct Stopping {
  static constexpr const char* name = "stopping";
  std::string signal;    ///< its name ("SIGTERM")
  std::string launcher;  ///< the launcher that sent it, when it kills the job next ("" otherwise)
  double grace_s = 0.0;
  std::string stops_at_once;  ///< what stops the run at once ("" when the launcher sent it)
  template <typename F>
  void fields(F&& f) const {
    f("signal", signal);
    f("launcher", launcher);
    f("grace_s", grace_s);
    f("stops_at_once", stops_at_once);
  }
};

/// The launcher (mpiexec, srun) is gone: the run stops now, finished tasks are kept.
struct LauncherGone {
  static constexpr const char* name = "launcher_gone";
  std::string launcher;
  template <typename F>
  void fields(F&& f) const {
    f("launcher", launcher);
  }
};

/// A worker has not been heard from: its node or the network failed; the run stops now.
struct RankLost {
  static constexpr const char* name = "rank_lost";
  int rank = 0;
  std::string host;
  double silent_s = 0.0;
  template <typename F>
  void fields(F&& f) const {
    f("rank", rank);
    f("host", host);
    f("silent_s", silent_s);
  }
};

/// The run ended (completely, or stopped early: summary.exit_code() == 4).
struct Finished {
  static constexpr const char* name = "finished";
  std::string store;
  RunSummary summary;
  template <typename F>
  void fields(F&& f) const {
    const auto& s = summary;
    f("store", store);
    f("exit_code", s.exit_code());
    f("stopped_because", stopped_because(s));
    f("done", s.done);
    f("diverged", s.diverged);
    f("vanished", s.vanished);
    f("failed", s.failed);
    f("not_needed", s.not_needed);
    f("already_finished", s.skipped);
    f("wall_s", s.wall_s);
    f("resumed", s.resumed);
    f("ended_first_layer", s.ended_first_layer);
    f("ended_last_layer", s.ended_last_layer);
    f("store_failed", s.store_failed);
    f("store_diverged", s.store_diverged);
    f("store_vanished", s.store_vanished);
    f("store_pending", s.store_pending);
  }
};

/// `--dump-weights`: the tapes of the done tasks were written into the store's /dump.
struct WeightsDumped {
  static constexpr const char* name = "weights_dumped";
  std::uint64_t tasks = 0, bytes = 0;
  std::uint64_t not_done = 0;  ///< tasks of the sweep without a dump (not done)
  template <typename F>
  void fields(F&& f) const {
    f("tasks", tasks);
    f("bytes", bytes);
    f("not_done", not_done);
  }
};

/// Rank 0 hit an error outside any task (e.g. out of memory between bundles): the process ends
/// with exit code 1 as soon as the sink returns (under MPI the job is aborted), so a sink that
/// queues must have written this event before it returns. Every task written before is kept.
struct Fatal {
  static constexpr const char* name = "fatal";
  int ranks = 1;        ///< the ranks of the run
  std::string message;  ///< what failed

  template <typename F>
  void fields(F&& f) const {
    f("ranks", ranks);
    f("message", message);
  }
};

/// What every kind of event has: its name, and its fields for any `f` taking (key, value).
namespace detail {
struct AnyField {
  template <typename V>
  void operator()(const char*, const V&) const {}
};
}  // namespace detail
template <typename T>
concept Kind = requires(const T& e, detail::AnyField f) {
  { T::name } -> std::convertible_to<const char*>;
  e.fields(f);
};

}  // namespace rcsweep::sweep::event

namespace rcsweep::sweep {

using Event =
    std::variant<event::WaitingForStore, event::StoreGrown, event::NoFlock, event::Reused, event::KernelsDiffer,
                 event::Started, event::Warning, event::Progress, event::TaskEnded, event::Paused, event::Stopping,
                 event::LauncherGone, event::RankLost, event::Finished, event::WeightsDumped, event::Fatal>;

/// Whether every alternative of a variant is an event::Kind.
template <typename V>
inline constexpr bool all_kinds = false;
template <typename... T>
inline constexpr bool all_kinds<std::variant<T...>> = (event::Kind<T> && ...);
static_assert(all_kinds<Event>, "every kind of event has its name and its fields (sweep/events.hpp)");

/// Receives the events of a run (rank 0 only); must be thread-safe.
using EventSink = std::function<void(const Event&)>;

/// The event's name as `--progress json` writes it ("started", "progress", "task_ended", ...).
inline const char* event_name(const Event& e) {
  return std::visit([](const auto& x) -> const char* { return std::decay_t<decltype(x)>::name; }, e);
}

/// Give `e` to `sink`, if there is one.
inline void report(const EventSink& sink, const Event& e) {
  if (sink) sink(e);
}

}  // namespace rcsweep::sweep
