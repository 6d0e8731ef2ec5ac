// Rank 0's service thread: hands out units (bundles or slices of them) to the workers, collects
// their results and those of rank 0's own compute thread, writes the store in batches, takes the
// adaptive decisions the written results allow, listens for the workers' heartbeats and carries
// out a stop (grace period, cancels, a launcher that is gone, a worker that is lost).
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "plan/adaptive.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "sweep/driver.hpp"
#include "sweep/farm.hpp"
#include "sweep/progress.hpp"
#include "sweep/work_queue.hpp"

namespace rcsweep::sweep {

/// Rank 0's view of a stop: the signal (from itself or a worker) and when running bundles are
/// abandoned. Set by the service thread, read by rank 0's compute thread.
struct StopState {
  std::atomic<int> signal{0};
  std::atomic<steady::rep> abandon_at{steady::time_point::max().time_since_epoch().count()};
  bool past_grace() const {
    return steady::now().time_since_epoch().count() > abandon_at.load(std::memory_order_relaxed);
  }
};

/// Results of rank 0's compute thread, waiting for the service thread.
class ResultQueue {
 public:
  void push(std::vector<store::TaskResult> results);
  std::vector<store::TaskResult> take();

 private:
  std::mutex mutex_;
  std::vector<store::TaskResult> items_;
};

/// Everything the service works with; the references outlive it.
struct ServiceContext {
  const plan::Plan& plan;
  const RunOptions& opt;
  MPI_Comm comm;
  store::Store& store;
  WorkQueue& work;
  ResultQueue& local;  ///< rank 0's own results
  StopState& stop;
  RunSummary& summary;                         ///< the writer's counters and the tasks' outcomes
  std::vector<store::Platform> rank_platform;  ///< per rank: its BLAS kernel, CPU and host
  double progress_flops = 0.0;                 ///< the work the progress counts (flops, tasks)
  std::uint64_t progress_tasks = 0;
  plan::ReplicateRule* rule = nullptr;                               ///< adaptive replicates: the decisions, else null
  std::function<std::vector<WorkItem>(const TaskList&)> make_units;  ///< released tasks -> units (with a rule)
  const std::vector<store::TaskStatus>& status_at_start;             ///< the store's statuses before the run
};

class Service {
 public:
  explicit Service(ServiceContext context);

  /// Rank 0's progress inside its current bundle (see Progress::set_partial).
  void partial_progress(double flops) { progress_.set_partial(flops); }

  /// Serve until rank 0's compute thread has finished (`local_finished`) and every worker was
  /// told to stop (or, without a launcher, is no longer waited for).
  void run(const std::atomic<bool>& local_finished);

 private:
  void watch_stop();
  bool collect(std::vector<store::TaskResult>& batch);
  bool finished(bool local_done) const;
  bool serve_one_worker(std::vector<store::TaskResult>& batch);
  bool assign(std::size_t w);
  bool serve_parked();
  template <class F>
  void guard_io(F&& f);
  void begin_stop(int sig);
  void launcher_died();
  void note_ended(const store::TaskResult& r);
  void listen_for_heartbeats();
  void update_grace();
  void stop_worker(std::size_t w);
  void cancel_busy_workers();
  void write(std::vector<store::TaskResult>& batch);
  void count(const store::TaskResult& r);
  void decide(const std::vector<store::TaskResult>& batch);

  ServiceContext c_;
  int n_workers_;
  // Per rank: computing a bundle; told to abandon it; sends nothing more (told to stop, or left
  // because its launcher is gone: a leaving worker's last message may follow its last results).
  std::vector<bool> busy_, cancelled_, stopped_;
  int n_stopped_ = 0;
  std::optional<steady::time_point> past_grace_at_;  // when the grace period was first seen over
  steady::time_point stop_at_{};                     // when the stop began (begin_stop)
  bool gone_ = false;                                // the launcher died (launcher_died)
  steady::time_point gone_at_{};
  steady::time_point oldest_{};  // arrival of the oldest result not yet written
  Progress progress_;
  std::vector<std::size_t> parked_;        // workers waiting for released work
  std::vector<steady::time_point> heard_;  // per rank: the last message (result or heartbeat) from it
  std::vector<double> patience_s_;         // per rank: how long it may be silent (its bundle's layers)
  steady::time_point polled_;              // the last listen_for_heartbeats
  unsigned continued_;                     // times_continued() then
};

}  // namespace rcsweep::sweep
