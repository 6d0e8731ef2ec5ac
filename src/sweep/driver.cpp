#include "sweep/driver.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <span>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "base/platform.hpp"
#include "linalg/linalg.hpp"
#include "metrics/metrics.hpp"
#include "models/task_runner.hpp"
#include "plan/adaptive.hpp"
#include "rcsweep/version.hpp"
#include "store/reuse.hpp"
#include "store/store.hpp"
#include "sweep/message.hpp"
#include "sweep/mpi.hpp"
#include "sweep/progress.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::sweep {
namespace {

constexpr int tag_result = 11;  // worker -> 0: its stop signal (int32) + packed results of its last bundle: "more work"
constexpr int tag_assign = 12;  // 0 -> worker: task ids of the next bundle; empty: stop
constexpr int tag_cancel = 13;  // 0 -> busy worker: abandon the running bundle (grace period over)
constexpr int tag_beat = 14;    // worker -> 0: a heartbeat (no data), at most every beat_s while it works or waits
constexpr double beat_s = 1.0;
/// A worker's heartbeats come between the layers of its bundle: rank 0 waits for one at least
/// RunOptions::silence_s, and 10 times a layer of the bundle at 1 GFLOP/s (a slow rate for any
/// layer), before it takes the worker for lost.
constexpr double silent_layer_factor = 10.0 / 1e9;
/// Rank 0 was itself not running between two polls of its loop for this share of
/// RunOptions::silence_s (the job stopped, its machine or VM paused): the workers' silence over
/// that time proves nothing, they were most likely paused with it.
constexpr double paused_share = 0.25;
/// How long a new run waits for a run that is stopping to let go of the store's writer lock (its
/// ranks flush and exit within about a second after a killed launcher; a grace period is longer).
constexpr double stopping_wait_s = 10.0;
constexpr std::int32_t leaving = -1;  // in place of the stop signal: the worker's launcher is gone, it exits now

using TaskList = std::vector<std::uint64_t>;
using steady = std::chrono::steady_clock;

// When the launcher has died (stop.hpp), rank 0 takes the last results of the workers for this long
// and workers try this long to hand theirs over; then every rank exits. Results still computing or
// in flight are lost (their tasks stay pending).
constexpr double gone_collect_s = 1.0;
constexpr double gone_send_s = 2.0;
// When the launcher tears the job down (its SIGTERM: SIGKILL follows at least 1 s after the grace
// period, stop.hpp), rank 0 waits this long after the grace period for workers that have not
// reported: a worker whose node failed never does, and the store must be closed before the SIGKILL.
constexpr double teardown_collect_s = 0.5;

double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }

/// Compute one bundle; an exception marks all its tasks failed (the sweep goes on). When
/// `cancelled` says so the bundle is abandoned: only the tasks finished before are returned.
std::vector<store::TaskResult> compute(const BundleRunner& runner, const plan::Plan& plan, const TaskList& tasks,
                                       int rank, const std::function<bool()>& cancelled) {
  std::vector<store::TaskResult> results;
  try {
    runner(
        plan, tasks, [&](models::TaskOutput&& out) { results.push_back(to_result(std::move(out), rank)); }, cancelled);
  } catch (const models::Cancelled&) {
    return results;
  } catch (const std::exception& e) {
    results.clear();
    for (const auto id : tasks) {
      store::TaskResult r;
      r.task = id;
      r.status = store::TaskStatus::failed;
      r.rank = rank;
      r.message = is_out_of_memory(e) ? "failed: " + out_of_memory_message("computing its bundle", e, 0.0)
                                      : std::string("failed: ") + e.what();
      results.push_back(std::move(r));
    }
  }
  return results;
}

/// A unit of work (a bundle's pending tasks, or a slice of them) and its estimated cost.
struct WorkItem {
  TaskList tasks;
  double flops = 0.0;
  double seconds = 0.0;  ///< estimated time on one rank (RunOptions::calibration)
};

/// Work shared by rank 0's compute thread and its service thread. With a deadline, pop() only
/// hands out a unit (the largest first) whose estimated time fits before it; the estimates are
/// scaled by measured / estimated time of the finished tasks once a second of work is done.
/// With adaptive replicates (`growing`) results may add work (push): while tasks handed out are
/// not yet written, an empty queue means "wait", not "done".
class WorkQueue {
 public:
  WorkQueue(const plan::Plan& plan, std::deque<WorkItem> items, std::optional<steady::time_point> deadline,
            bool growing)
      : plan_(plan),
        items_(std::move(items)),
        deadline_(deadline),
        task_estimate_s_(plan.tasks.size(), 0.0),
        growing_(growing) {
    for (const auto& w : items_) note_estimates(w);
  }
  /// The next unit; waits while more work may still come. Nothing: no more work for this run.
  std::optional<TaskList> pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !waiting(); });
    return take();
  }
  /// The next unit, nothing when there is none now; `wait` tells whether more may come.
  std::optional<TaskList> try_pop(bool& wait) {
    std::lock_guard lock(mutex_);
    wait = waiting();
    return wait ? std::nullopt : take();
  }
  /// Units that results made necessary, inserted largest first.
  void push(std::vector<WorkItem> items) {
    {
      std::lock_guard lock(mutex_);
      for (auto& w : items) {
        note_estimates(w);
        const auto at = std::find_if(items_.begin(), items_.end(),
                                     [&](const WorkItem& x) { return x.seconds < w.seconds; });
        items_.insert(at, std::move(w));
      }
    }
    changed_.notify_all();
  }
  /// `n` tasks handed out were written (their results can no longer add work).
  void written(std::uint64_t n) {
    {
      std::lock_guard lock(mutex_);
      out_ -= std::min(out_, n);
    }
    changed_.notify_all();
  }
  bool empty() {
    std::lock_guard lock(mutex_);
    return items_.empty();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
  }
  /// Task `id` finished in `seconds`.
  void calibrate(std::uint64_t id, double seconds) {
    std::lock_guard lock(mutex_);
    done_estimate_s_ += task_estimate_s_.at(id);
    done_s_ += seconds;
    if (done_s_ >= 1.0 && done_estimate_s_ > 0.0) scale_ = done_s_ / done_estimate_s_;
  }
  bool time_limited() {
    std::lock_guard lock(mutex_);
    return time_limited_;
  }

 private:
  bool waiting() const { return growing_ && !stop_ && items_.empty() && out_ > 0; }
  /// Each task's share of its unit's estimate, by flops (for the scaling in calibrate).
  void note_estimates(const WorkItem& w) {
    for (const auto id : w.tasks)
      task_estimate_s_[id] = w.flops > 0.0 ? w.seconds * plan_.tasks[id].flops / w.flops : 0.0;
  }
  std::optional<TaskList> take() {
    if (items_.empty() || stop_) return std::nullopt;
    auto it = items_.begin();
    if (deadline_) {
      const auto now = steady::now();
      it = std::find_if(items_.begin(), items_.end(), [&](const WorkItem& w) {
        return now + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(w.seconds * scale_)) <=
               *deadline_;
      });
      if (it == items_.end()) {
        stop_ = time_limited_ = true;
        changed_.notify_all();  // rank 0's compute thread may be waiting in pop()
        return std::nullopt;
      }
    }
    TaskList t = std::move(it->tasks);
    items_.erase(it);
    out_ += t.size();
    return t;
  }

  const plan::Plan& plan_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<WorkItem> items_;
  std::optional<steady::time_point> deadline_;
  std::vector<double> task_estimate_s_;
  double scale_ = 1.0, done_estimate_s_ = 0.0, done_s_ = 0.0;
  bool stop_ = false, time_limited_ = false;
  bool growing_ = false;
  std::uint64_t out_ = 0;  // tasks handed out whose results are not written yet
};

/// Rank 0's view of a stop: the signal (from itself or a worker) and when running bundles are
/// abandoned. Set by the service thread, read by rank 0's compute thread.
struct StopState {
  std::atomic<int> signal{0};
  std::atomic<steady::rep> abandon_at{steady::time_point::max().time_since_epoch().count()};
  bool past_grace() const {
    return steady::now().time_since_epoch().count() > abandon_at.load(std::memory_order_relaxed);
  }
};

/// The stored form of a replicate an adaptive rule does not need: status only, no values.
store::TaskResult not_needed_result(std::uint64_t id) {
  store::TaskResult r;
  r.task = id;
  r.status = store::TaskStatus::not_needed;
  r.wall_s = std::numeric_limits<double>::quiet_NaN();
  r.rank = -1;
  return r;
}

/// A finished result told to the adaptive rule: its targets' values, or nothing when it failed.
/// A finished task that ended before the last layer: failed, diverged or vanished (--retry-failed runs them again).
bool ended_early(store::TaskStatus s) {
  return s == store::TaskStatus::failed || s == store::TaskStatus::diverged || s == store::TaskStatus::vanished;
}

plan::ReplicateRule::Decisions record_result(plan::ReplicateRule& rule, const plan::Plan& plan,
                                             const store::TaskResult& r) {
  if (r.status == store::TaskStatus::failed) return rule.record(r.task, std::nullopt);
  return rule.record(r.task, plan::target_values(plan.spec.adaptive, plan.max_depth, r.layers));
}

class ResultQueue {
 public:
  void push(std::vector<store::TaskResult> results) {
    std::lock_guard lock(mutex_);
    for (auto& r : results) items_.push_back(std::move(r));
  }
  std::vector<store::TaskResult> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(items_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<store::TaskResult> items_;
};

/// Rank 0's service thread: hands out units (bundles or slices of them) to workers, collects
/// results, writes the store.
class Service {
 public:
  Service(const plan::Plan& plan, store::Store& store, WorkQueue& work, ResultQueue& local, StopState& stop,
          MPI_Comm comm, const RunOptions& opt, double pending_flops, std::uint64_t pending_tasks, RunSummary& summary,
          std::vector<store::Platform> rank_platform, plan::ReplicateRule* rule,
          std::function<std::vector<WorkItem>(const TaskList&)> make_units,
          const std::vector<store::TaskStatus>& status_at_start)
      : plan_(plan),
        store_(store),
        work_(work),
        local_(local),
        stop_(stop),
        comm_(comm),
        opt_(opt),
        n_workers_(mpi::comm_size(comm) - 1),
        busy_(static_cast<std::size_t>(n_workers_) + 1, false),
        cancelled_(busy_),
        stopped_(busy_),
        progress_(pending_flops, pending_tasks, opt.progress),
        summary_(summary),
        rank_platform_(std::move(rank_platform)),
        rule_(rule),
        make_units_(std::move(make_units)),
        status_at_start_(status_at_start),
        heard_(busy_.size(), steady::now()),
        patience_s_(busy_.size(), opt.silence_s),
        polled_(steady::now()),
        continued_(times_continued()) {
    if (rule_) progress_.total_is_bound();
  }

  /// Rank 0's progress inside its current bundle (see Progress::set_partial).
  void partial_progress(double flops) { progress_.set_partial(flops); }

  void run(const std::atomic<bool>& local_finished) {
    auto last_write = std::chrono::steady_clock::now(), last_sync = last_write;
    std::vector<store::TaskResult> batch;
    for (;;) {
      if (!gone_ && launcher_gone()) launcher_died();
      if (!gone_) listen_for_heartbeats();
      if (stop_.signal == 0 && stop_signal() != 0) begin_stop(stop_signal());
      if (stop_.signal != 0) update_grace();
      // Past the grace period rank 0 cancels the workers' bundles, unless the launcher tears the
      // job down: then every rank got its SIGTERM and abandons its bundle itself, and a message
      // to a rank whose node failed would block rank 0 (Open MPI's TCP transport reports the failed
      // connection through the launcher, which no longer answers).
      if (stop_.signal != 0 && stop_.past_grace() && !gone_) {
        if (!launcher_teardown()) cancel_busy_workers();
        if (!past_grace_at_) past_grace_at_ = steady::now();
      }
      const bool was_empty = batch.empty();
      // Serve every worker that is waiting (each has at most one message out) before the next
      // write: after a long write they all get their next bundle at once, and their results
      // share one batch, so batching holds even when writes take longer than the interval.
      bool busy = false;
      for (int i = 0; i < n_workers_ && serve_one_worker(batch); ++i) busy = true;
      if (!parked_.empty()) busy = serve_parked() || busy;
      const bool local_done = local_finished.load();
      auto mine = local_.take();
      busy = busy || !mine.empty();
      for (auto& r : mine) batch.push_back(std::move(r));
      if (was_empty && !batch.empty()) oldest_ = steady::now();  // the batch's first arrival
      // Without a launcher, or while it tears the job down, workers that have not reported by now
      // are not waited for (they may be dead).
      const bool finished = local_done &&
                            (n_stopped_ == n_workers_ || (gone_ && seconds_since(gone_at_) >= gone_collect_s) ||
                             (launcher_teardown() && past_grace_at_ &&
                              seconds_since(*past_grace_at_) >= teardown_collect_s));
      const auto now = std::chrono::steady_clock::now();
      // Adaptive replicates: results may release work; write at once when none is left to hand out.
      if (!batch.empty() && (finished || (rule_ && work_.empty()) ||
                             std::chrono::duration<double>(now - last_write).count() >= opt_.write_interval_s)) {
        write(batch);
        last_write = now;
      }
      // H5Fflush hands the data to the OS; an fsync now and then also survives a node crash.
      if (!gone_ && std::chrono::duration<double>(now - last_sync).count() >= opt_.sync_interval_s) {
        guard_io([&] { store_.sync(); });
        last_sync = now;
      }
      progress_.report();
      if (finished) break;
      if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // idle: leave the core to compute
    }
    progress_.report(true);
  }

 private:
  bool serve_one_worker(std::vector<store::TaskResult>& batch) {
    if (n_workers_ == 0) return false;
    int flag = 0;
    MPI_Status status;
    mpi::check(MPI_Iprobe(MPI_ANY_SOURCE, tag_result, comm_, &flag, &status), "MPI_Iprobe");
    if (!flag) return false;
    int count = 0;
    mpi::check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    std::vector<char> buf(static_cast<std::size_t>(count));
    mpi::check(MPI_Recv(buf.data(), count, MPI_BYTE, status.MPI_SOURCE, tag_result, comm_, MPI_STATUS_IGNORE),
               "MPI_Recv");
    std::int32_t worker_signal = 0;
    if (buf.size() < sizeof worker_signal) throw MpiError("a worker's result message has no header");
    std::memcpy(&worker_signal, buf.data(), sizeof worker_signal);
    buf.erase(buf.begin(), buf.begin() + sizeof worker_signal);
    for (auto& r : unpack(buf)) batch.push_back(std::move(r));
    const auto w = static_cast<std::size_t>(status.MPI_SOURCE);
    heard_[w] = steady::now();
    if (gone_ || worker_signal == leaving) {  // the worker's last message: it does not wait for an answer
      busy_[w] = false;
      stop_worker(w);
      return true;
    }
    if (worker_signal > 0 && stop_.signal == 0) begin_stop(worker_signal);
    busy_[w] = false;
    if (!assign(w)) parked_.push_back(w);  // results still to come may give it work
    return true;
  }

  /// Send worker `w` its next unit, or tell it to stop; false when it has to wait for results.
  bool assign(std::size_t w) {
    bool wait = false;
    const TaskList next = work_.try_pop(wait).value_or(TaskList{});
    if (wait) return false;
    busy_[w] = !next.empty();
    double layer_flops = 0.0;
    for (const auto id : next) layer_flops += plan_.tasks[id].flops / (plan_.max_depth + 1);
    heard_[w] = steady::now();
    patience_s_[w] = std::max(opt_.silence_s, silent_layer_factor * layer_flops);
    if (next.empty()) stop_worker(w);
    mpi::check(
        MPI_Send(next.data(), static_cast<int>(next.size()), MPI_UINT64_T, static_cast<int>(w), tag_assign, comm_),
        "MPI_Send");
    return true;
  }

  /// Workers waiting for work that results may release: served once there is some (or none can come).
  bool serve_parked() {
    const auto before = parked_.size();
    std::erase_if(parked_, [&](std::size_t w) { return assign(w); });
    return parked_.size() != before;
  }

  /// A failed write (a full disk, a lost file system) ends the run: say what is safe and what to do.
  template <class F>
  void guard_io(F&& f) {
    try {
      f();
    } catch (const StoreError& e) {
      const std::string what = e.what();
      const bool full = store::is_disk_full(what);
      throw StoreError("cannot write " + opt_.output.string() + (full ? ": the disk is full" : "") + " (" + what +
                       "). Every task marked done in the store is safe; " +
                       (full ? "free space and run" : "fix the cause and run") + " the same command to resume.");
    }
  }

  /// A stop signal on any rank: no new bundles; running ones get the grace period (cut short when
  /// the launcher is about to kill the job).
  void begin_stop(int sig) {
    const double grace = effective_grace(opt_.grace_s);
    store_.note_stopping();
    work_.stop();
    stop_at_ = steady::now();
    update_grace();
    stop_.signal = sig;
    if (launcher_teardown())
      std::fprintf(stderr,
                   "[rcsweep] %s from %s, which kills the job next: no new tasks; running bundles that finish "
                   "within %.0f s are kept, the rest are abandoned\n",
                   signal_name(sig).c_str(), launcher_name().c_str(), grace);
    else
      std::fprintf(stderr,
                   "[rcsweep] %s: no new tasks; running bundles that finish within %.0f s are kept, the rest are "
                   "abandoned (%s stops at once)\n",
                   signal_name(sig).c_str(), grace,
                   sig == SIGINT || sig == SIGTERM ? "the same signal again" : "a SIGINT or SIGTERM");
  }

  /// The launcher died (or the workers are lost): nobody waits for this run. Stop at once, take
  /// what the workers send within gone_collect_s, write it and end.
  void launcher_died() {
    store_.note_stopping();
    gone_ = true;
    gone_at_ = steady::now();
    work_.stop();
    stop_.abandon_at = gone_at_.time_since_epoch().count();
    if (stop_.signal == 0) {
      stop_at_ = gone_at_;
      stop_.signal = stop_signal() != 0 ? stop_signal() : SIGHUP;
    }
    if (!workers_lost())
      std::fprintf(stderr, "[rcsweep] %s is gone: stopping now; finished tasks are kept\n", launcher_name().c_str());
  }

  /// The layer where a diverged or vanished task ended: the first without a finite log ||X||_F.
  void note_ended(const store::TaskResult& r) {
    constexpr auto log_fro = metrics::metric_index("log_fro");
    int at = 0;
    while (at < static_cast<int>(r.layers.size()) && std::isfinite(r.layers[static_cast<std::size_t>(at)][log_fro]))
      ++at;
    auto& s = summary_;
    s.ended_first_layer = s.ended_first_layer < 0 ? at : std::min(s.ended_first_layer, at);
    s.ended_last_layer = std::max(s.ended_last_layer, at);
  }

  /// Heartbeats of the workers; a worker still expected to speak (not told to stop) that has been
  /// silent for longer than its patience is lost: then this rank's node (or the network between
  /// them) failed, and no launcher will end the run: end it as if the launcher were gone.
  /// A pause of the job is not a failure: when this rank was stopped and continued (SIGCONT), or
  /// its loop was not run for a while (a paused VM: no SIGCONT, the monotonic clock jumps; one
  /// that stands still during a pause counts no silence), every worker gets a fresh window.
  void listen_for_heartbeats() {
    if (n_workers_ == 0) return;
    const auto now = steady::now();
    const double gap = std::chrono::duration<double>(now - polled_).count();
    polled_ = now;
    if (const unsigned continued = times_continued(); continued != continued_ || gap > paused_share * opt_.silence_s) {
      continued_ = continued;
      std::fill(heard_.begin(), heard_.end(), now);
      if (gap >= 1.0 && opt_.progress)
        std::fprintf(stderr,
                     "[rcsweep] rank 0 was held up for %.0f s (the job stopped, its machine paused, or a slow "
                     "write): the workers' silence meanwhile is not counted\n",
                     gap);
    }
    for (int flag = 1;;) {
      MPI_Status status;
      mpi::check(MPI_Iprobe(MPI_ANY_SOURCE, tag_beat, comm_, &flag, &status), "MPI_Iprobe");
      if (!flag) break;
      mpi::check(MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, tag_beat, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
      heard_[static_cast<std::size_t>(status.MPI_SOURCE)] = steady::now();
    }
    for (int w = 1; w <= n_workers_; ++w) {
      const auto i = static_cast<std::size_t>(w);
      if (stopped_[i] || seconds_since(heard_[i]) <= patience_s_[i]) continue;
      const double silent = seconds_since(heard_[i]);
      note_workers_lost();
      summary_.lost_rank = w;
      launcher_died();
      std::fprintf(stderr,
                   "[rcsweep] rank %d (%s) has not been heard from for %.0f s: its node or the network failed; "
                   "stopping now, finished tasks are kept\n",
                   w, i < rank_platform_.size() ? rank_platform_[i].host.c_str() : "?", silent);
      return;
    }
  }

  /// Running bundles are abandoned `effective_grace` after the stop began. It shrinks when the
  /// launcher's SIGTERM or death comes after the stop began (a worker's signal may come first).
  void update_grace() {
    const auto at = stop_at_ + std::chrono::duration_cast<steady::duration>(
                                   std::chrono::duration<double>(effective_grace(opt_.grace_s)));
    stop_.abandon_at = std::min(stop_.abandon_at.load(), at.time_since_epoch().count());
  }

  void stop_worker(std::size_t w) {
    if (!stopped_[w]) ++n_stopped_;
    stopped_[w] = true;
  }

  /// Grace period over: tell the workers still computing to abandon their bundles.
  void cancel_busy_workers() {
    for (int w = 1; w <= n_workers_; ++w) {
      const auto i = static_cast<std::size_t>(w);
      if (!busy_[i] || cancelled_[i]) continue;
      mpi::check(MPI_Send(nullptr, 0, MPI_BYTE, w, tag_cancel, comm_), "MPI_Send");
      cancelled_[i] = true;
    }
  }

  void write(std::vector<store::TaskResult>& batch) {
    for (auto& r : batch)
      if (r.rank >= 0 && static_cast<std::size_t>(r.rank) < rank_platform_.size())
        r.platform = rank_platform_[static_cast<std::size_t>(r.rank)];
    const auto start = steady::now();
    guard_io([&] { store_.write(batch); });
    const auto end = steady::now();
    summary_.write_s += std::chrono::duration<double>(end - start).count();
    ++summary_.write_batches;
    summary_.max_batch = std::max<std::uint64_t>(summary_.max_batch, batch.size());
    summary_.max_write_latency_s = std::max(summary_.max_write_latency_s,
                                            std::chrono::duration<double>(end - oldest_).count());
    for (const auto& r : batch) {
      progress_.add(plan_.tasks[r.task].flops);
      if (r.status == store::TaskStatus::done) work_.calibrate(r.task, r.wall_s);
      switch (r.status) {
        case store::TaskStatus::done: ++summary_.done; break;
        case store::TaskStatus::failed: ++summary_.failed; break;
        case store::TaskStatus::diverged:
          ++summary_.diverged;
          note_ended(r);
          break;
        case store::TaskStatus::vanished:
          ++summary_.vanished;
          note_ended(r);
          break;
        case store::TaskStatus::pending:
        case store::TaskStatus::not_needed: break;
      }
      if (r.status != store::TaskStatus::done && opt_.progress)
        std::fprintf(stderr, "[rcsweep] task %llu %s\n", static_cast<unsigned long long>(r.task), r.message.c_str());
    }
    if (rule_) decide(batch);
    work_.written(batch.size());  // after decide's push: an empty queue must not look final before
    batch.clear();
  }

  /// Adaptive replicates: the decisions the written results allow. Replicates not needed are
  /// recorded as such (and leave the progress total); released ones are handed out as units.
  void decide(const std::vector<store::TaskResult>& batch) {
    TaskList released;
    std::vector<store::TaskResult> dropped;
    for (const auto& r : batch) {
      const auto d = record_result(*rule_, plan_, r);
      released.insert(released.end(), d.released.begin(), d.released.end());
      for (const auto id : d.not_needed)  // (a result copied from another store stays)
        if (status_at_start_[id] == store::TaskStatus::pending) dropped.push_back(not_needed_result(id));
    }
    if (!dropped.empty()) {
      guard_io([&] { store_.write(dropped); });
      for (const auto& r : dropped) progress_.drop(plan_.tasks[r.task].flops);
      summary_.not_needed += dropped.size();
    }
    if (!released.empty()) work_.push(make_units_(released));
  }

  const plan::Plan& plan_;
  store::Store& store_;
  WorkQueue& work_;
  ResultQueue& local_;
  StopState& stop_;
  MPI_Comm comm_;
  const RunOptions& opt_;
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
  RunSummary& summary_;
  std::vector<store::Platform> rank_platform_;                        // per rank: its BLAS kernel, CPU and host
  plan::ReplicateRule* rule_;                                         // adaptive replicates: the decisions, else null
  std::function<std::vector<WorkItem>(const TaskList&)> make_units_;  // released tasks -> units
  std::vector<std::size_t> parked_;                                   // workers waiting for released work
  const std::vector<store::TaskStatus>& status_at_start_;             // the store's statuses before the run
  std::vector<steady::time_point> heard_;  // per rank: the last message (result or heartbeat) from it
  std::vector<double> patience_s_;         // per rank: how long it may be silent (its bundle's layers)
  steady::time_point polled_;              // the last listen_for_heartbeats
  unsigned continued_;                     // times_continued() then
};

// A cancel message from rank 0, received if there is one.
bool take_cancel(MPI_Comm comm) {
  int flag = 0;
  mpi::check(MPI_Iprobe(0, tag_cancel, comm, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
  if (flag) mpi::check(MPI_Recv(nullptr, 0, MPI_BYTE, 0, tag_cancel, comm, MPI_STATUS_IGNORE), "MPI_Recv");
  return flag != 0;
}

void run_worker(const BundleRunner& runner, const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, int rank,
                RunSummary& summary) {
  // Heartbeats tell rank 0 that this rank and its node live (Service::listen_for_heartbeats):
  // between the layers of a bundle and while waiting for the next one. Never waited for.
  auto beaten = steady::now();
  const auto beat = [&] {
    if (seconds_since(beaten) < beat_s) return;
    beaten = steady::now();
    MPI_Request request;
    mpi::check(MPI_Isend(nullptr, 0, MPI_BYTE, 0, tag_beat, comm, &request), "MPI_Isend");
    mpi::check(MPI_Request_free(&request), "MPI_Request_free");
  };
  // A bundle is abandoned when this rank's own grace period is over, rank 0 says so or the launcher died.
  const auto cancelled = [&] {
    beat();
    return launcher_gone() || (stop_signal() != 0 && seconds_since_stop_signal() > effective_grace(opt.grace_s)) ||
           take_cancel(comm);
  };
  // Header: this rank's stop signal, or `leaving` once its launcher is gone; then the packed results
  // of its last bundle. Without a launcher rank 0 may be gone too: neither the hand-over nor the
  // answer is waited for without bound (a blocking send of a large message would wait forever).
  std::vector<char> results(sizeof(std::int32_t));
  bool left = false;                          // the last hand-over said `leaving`
  std::optional<steady::time_point> gone_at;  // when this rank saw its launcher gone: waits end gone_send_s later
  const auto hand_over = [&] {
    const std::int32_t sig = launcher_gone() ? leaving : stop_signal();
    left = sig == leaving;
    std::memcpy(results.data(), &sig, sizeof sig);
    MPI_Request request;
    mpi::check(MPI_Isend(results.data(), static_cast<int>(results.size()), MPI_BYTE, 0, tag_result, comm, &request),
               "MPI_Isend");
    for (int done = 0;;) {
      mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return true;
      if (!gone_at && launcher_gone()) gone_at = steady::now();
      if (gone_at && seconds_since(*gone_at) > gone_send_s) {
        (void)new std::vector<char>(std::move(results));  // the send may still read it: leave it to MPI
        return false;
      }
    }
  };
  // Once the launcher is gone, rank 0 answers no more: the worker's last message says `leaving`
  // (also after results sent just before it noticed, which rank 0 may have answered with a bundle).
  const auto leave = [&] {
    if (left) return;
    results.resize(sizeof(std::int32_t));
    hand_over();
  };
  for (;;) {
    const auto sent = steady::now();
    if (!hand_over()) return;
    if (launcher_gone()) return leave();
    MPI_Status status;
    for (int flag = 0;;) {
      mpi::check(MPI_Iprobe(0, tag_assign, comm, &flag, &status), "MPI_Iprobe");
      if (flag) break;
      if (launcher_gone()) return leave();
      beat();
    }
    int count = 0;
    mpi::check(MPI_Get_count(&status, MPI_UINT64_T, &count), "MPI_Get_count");
    TaskList tasks(static_cast<std::size_t>(count));
    mpi::check(MPI_Recv(tasks.data(), count, MPI_UINT64_T, 0, tag_assign, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    if (summary.bundles > 0) {  // the first request waits for the start-up, not for a hand-out
      const double waited = std::chrono::duration<double>(steady::now() - sent).count();
      summary.wait_s += waited;
      summary.max_wait_s = std::max(summary.max_wait_s, waited);
    }
    if (tasks.empty()) return;
    ++summary.bundles;
    results.resize(sizeof(std::int32_t));
    for (const auto& r : compute(runner, plan, tasks, rank, cancelled)) pack(r, results);
  }
}

/// Adaptive replicates: the decisions that the store's finished tasks allow (those of earlier runs,
/// taken again: they depend on the results only). Replicates decided not needed but still pending
/// in the store (a run stopped between a decision and its write) are recorded now.
plan::ReplicateRule replay_decisions(const plan::Plan& plan, store::Store& store,
                                     const std::vector<store::TaskStatus>& status, bool retry_failed) {
  plan::ReplicateRule rule(plan);
  TaskList known;
  for (const auto& b : plan.bundles)
    for (const auto id : b.tasks) {
      const auto s = status[id];
      if (s == store::TaskStatus::done || (!retry_failed && ended_early(s))) known.push_back(id);
    }
  std::sort(known.begin(), known.end());
  std::vector<store::TaskResult> dropped;
  constexpr std::size_t batch = 4096;
  for (std::size_t i = 0; i < known.size(); i += batch) {
    const auto part = std::span(known).subspan(i, std::min(batch, known.size() - i));
    for (const auto& r : store.read_results(part)) {
      const auto d = record_result(rule, plan, r);
      for (const auto id : d.not_needed)
        if (status[id] == store::TaskStatus::pending) dropped.push_back(not_needed_result(id));
    }
  }
  store.write(dropped);
  return rule;
}

/// Say when a run's BLAS kernels differ among its ranks or from those of the store's finished
/// tasks: allowed, but such results agree only to rounding (docs/GUARANTEES.md).
void note_new_kernels(const std::vector<store::Platform>& ranks,
                      const std::vector<std::pair<store::Platform, std::uint64_t>>& stored) {
  std::vector<std::string> mine, before;
  for (const auto& p : ranks)
    if (std::find(mine.begin(), mine.end(), p.blas_kernel) == mine.end()) mine.push_back(p.blas_kernel);
  std::string stored_text;
  for (const auto& [p, n] : stored) {
    if (p.empty()) continue;  // not recorded (a store made before /provenance)
    stored_text += (stored_text.empty() ? "" : ", ") + p.blas_kernel + " (" + std::to_string(n) + " tasks)";
    if (std::find(before.begin(), before.end(), p.blas_kernel) == before.end()) before.push_back(p.blas_kernel);
  }
  std::string text;
  for (const auto& k : mine) text += (text.empty() ? "" : ", ") + k;
  if (mine.size() > 1)
    std::fprintf(stderr, "[rcsweep] note: the ranks of this run use different BLAS kernels (%s)\n", text.c_str());
  const bool new_kernel = !before.empty() && std::any_of(mine.begin(), mine.end(), [&](const std::string& k) {
    return std::find(before.begin(), before.end(), k) == before.end();
  });
  if (new_kernel)
    std::fprintf(stderr,
                 "[rcsweep] note: this run computes with %s; the store's finished tasks were computed with %s\n",
                 text.c_str(), stored_text.c_str());
  if (mine.size() > 1 || new_kernel)
    std::fprintf(stderr,
                 "[rcsweep] results of different BLAS kernels agree to rounding, not bitwise (docs/GUARANTEES.md); "
                 "rcsweep info counts the tasks of each\n");
}

/// --reuse of a store none of whose results fits this sweep is a mistake: say why, before any work.
void refuse_unusable(const std::filesystem::path& from, const plan::Plan& plan) {
  const auto r = store::compare_with_store(from, plan);
  if (!r.blockers.empty())
    throw StoreError("--reuse " + from.string() + ": none of its results fits this sweep (sweep '" + r.from_name +
                     "', plan hash " + r.from_hash + " -> " + plan.hash + "):\n" + store::describe(r) +
                     "drop --reuse " + from.string());
}

}  // namespace

store::TaskResult to_result(models::TaskOutput&& out, int rank) {
  store::TaskResult r;
  r.task = out.task;
  r.status = out.outcome == models::Outcome::done       ? store::TaskStatus::done
             : out.outcome == models::Outcome::vanished ? store::TaskStatus::vanished
                                                        : store::TaskStatus::diverged;
  r.wall_s = out.seconds;
  r.rank = rank;
  r.message = std::move(out.message);
  static_cast<models::TaskValues&>(r) = std::move(static_cast<models::TaskValues&>(out));
  return r;
}

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

int RunSummary::exit_code() const {
  if ((stop_signal != 0 || time_limited || launcher_gone) && store_pending > 0) return 4;
  return store_failed > 0 || (fail_on_diverged && store_diverged + store_vanished > 0) ? 3 : 0;
}

RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, const BundleRunner& runner_) {
  const BundleRunner runner = runner_ ? runner_ : BundleRunner(models::run_bundle);
  const int rank = mpi::comm_rank(comm), size = mpi::comm_size(comm);
  parallel::set_threads(opt.threads);
  linalg::set_blas_threads(opt.blas_threads);
  install_stop_handlers();
  RunSummary summary;
  summary.total = plan.tasks.size();
  summary.fail_on_diverged = opt.fail_on_diverged;
  const auto t0 = std::chrono::steady_clock::now();
  // The time limit: --time-limit from now, or the scheduler's end of the job less a minute for
  // the final flush and the MPI teardown, whichever comes first.
  std::optional<steady::time_point> deadline;
  if (opt.time_limit_s > 0)
    deadline = t0 + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(opt.time_limit_s));
  if (const auto end = scheduler_end_time()) {
    const auto left = std::chrono::duration_cast<steady::duration>(*end - std::chrono::system_clock::now() -
                                                                   std::chrono::seconds(60));
    if (!deadline || t0 + left < *deadline) deadline = t0 + left;
  }
  if (deadline) summary.time_limit_s = std::chrono::duration<double>(*deadline - t0).count();

  // Every rank's platform, at rank 0: the store records it per task (results are bitwise
  // reproducible on one BLAS kernel only; the host says which node computed it).
  std::vector<store::Platform> rank_platform;
  for (const auto& text : mpi::gather(linalg::blas_kernel() + '\n' + cpu_model() + '\n' + hostname(), 0, comm)) {
    const auto nl = text.find('\n'), nl2 = text.find('\n', nl + 1);
    rank_platform.push_back({text.substr(0, nl), text.substr(nl + 1, nl2 - nl - 1), text.substr(nl2 + 1)});
  }

  // Phase 1 (rank 0): open or create the store; every rank learns whether that worked.
  std::optional<store::Store> store;
  std::string error;
  if (rank == 0) {
    try {
      store::Provenance prov{version, git_commit, utc_now(),   hostname(),      linalg::blas_info(),
                             "",      size,       opt.threads, opt.blas_threads};
      // The store's one writer from here to the end of the run (docs/GUARANTEES.md).
      // A run that is stopping (killed launcher, a signal) lets go within seconds: wait for it.
      const store::WriterLock lock = store::WriterLock::acquire(
          opt.output, stopping_wait_s, [&](const std::string& holder) {
            if (opt.progress)
              std::fprintf(stderr, "[rcsweep] %s is still held by a run that is stopping (%s): waiting up to %.0f s\n",
                           opt.output.c_str(), holder.c_str(), stopping_wait_s);
          });
      std::error_code ec;
      const bool exists = std::filesystem::exists(std::filesystem::symlink_status(lock.path(), ec));
      if (opt.require_existing && !exists)
        throw StoreError(opt.output.string() + " does not exist: nothing to resume (drop --resume to start it)");
      for (const auto& from : opt.reuse) {  // before anything is written
        if (store::same_file(from, lock.path()))
          throw StoreError("--reuse " + from.string() +
                           " is the output store itself; --reuse copies from another store");
        refuse_unusable(from, plan);
      }
      if (exists && !opt.overwrite) {
        if (store::read_info(opt.output).plan_hash != plan.hash) {
          const auto grown = store::grow_in_place(lock, plan, prov);
          if (opt.progress)
            std::fprintf(
                stderr,
                "[rcsweep] %s was made from another version of the sweep file:\n%s[rcsweep] grown to this sweep: %llu finished tasks copied\n",
                opt.output.c_str(), store::describe(grown).c_str(), static_cast<unsigned long long>(grown.copied));
        }
        store.emplace(store::Store::open_resume(lock, plan, prov));
        summary.resumed = true;
      } else {
        store.emplace(store::Store::create(lock, plan, prov, opt.overwrite));
      }
      if (!lock.enforced() && opt.progress)
        std::fprintf(stderr,
                     "[rcsweep] note: the file system of %s has no flock: one writer per store is not enforced\n",
                     opt.output.c_str());
      for (const auto& from : opt.reuse) {
        const auto r = store::reuse_results(from, *store, plan);
        if (opt.progress)
          std::fprintf(
              stderr, "[rcsweep] --reuse %s: copied %llu finished tasks%s%s\n", from.c_str(),
              static_cast<unsigned long long>(r.copied),
              r.not_in_sweep
                  ? (" (" + std::to_string(r.not_in_sweep) + " of its finished tasks are not tasks of this sweep)")
                        .c_str()
                  : "",
              r.other_shards ? (" (" + std::to_string(r.other_shards) + " belong to other shards)").c_str() : "");
      }
    } catch (const std::exception& e) {
      error = is_out_of_memory(e) ? out_of_memory_message("opening the store", e, 0.0) : e.what();
    }
  }
  error = mpi::bcast(error, 0, comm);
  if (!error.empty()) throw StoreRefused(error);
  if (rank == 0)
    note_new_kernels(rank_platform, summary.resumed ? store->finished_by_platform()
                                                    : std::vector<std::pair<store::Platform, std::uint64_t>>{});

  if (rank != 0) {
    run_worker(runner, plan, opt, comm, rank, summary);
  } else {
    // Phase 2 (rank 0): the pending work (with --retry-failed also failed, diverged and vanished tasks),
    // largest bundle first.
    const auto status = store->task_status();
    const auto runnable = [&](std::uint64_t id) {
      return status[id] == store::TaskStatus::pending || (opt.retry_failed && ended_early(status[id]));
    };
    // Adaptive replicates: the decisions the store's finished tasks allow already (replayed on a
    // resume); only the replicates needed so far run now, the others when results release them.
    std::optional<plan::ReplicateRule> rule;
    if (plan.spec.adaptive.enabled()) rule.emplace(replay_decisions(plan, *store, status, opt.retry_failed));
    const auto to_run = [&](std::uint64_t id) { return runnable(id) && (!rule || rule->needed(id)); };
    // The units handed out: whole bundles, or slices of bundles where that shortens the estimated
    // makespan on `size` ranks (plan/schedule.hpp), priced at this machine's rates or rough ones.
    const plan::Calibration rates = opt.calibration ? *opt.calibration : plan::default_calibration();
    const auto item_of = [&](TaskList tasks, double calibrated_s) {
      WorkItem item;
      item.tasks = std::move(tasks);
      for (const auto id : item.tasks) item.flops += plan.tasks[id].flops;
      item.seconds = opt.calibration ? calibrated_s : item.flops / opt.assumed_flop_rate;
      return item;
    };
    std::vector<plan::BundleWork> pending;
    std::uint64_t in_shard = 0, possible_tasks = 0;  // possible: pending tasks a rule may still need
    double possible_flops = 0.0;
    for (const auto& b : plan.bundles) {
      in_shard += b.tasks.size();
      TaskList tasks;
      for (const auto id : b.tasks) {
        if (to_run(id)) tasks.push_back(id);
        if (rule && runnable(id) && !rule->needed(id) && !rule->not_needed(id)) {
          ++possible_tasks;
          possible_flops += plan.tasks[id].flops;
        }
      }
      if (!tasks.empty()) pending.push_back(plan::bundle_work(plan, tasks, rates));
    }
    const plan::Schedule schedule = plan::make_schedule(pending, size);
    std::deque<WorkItem> work;
    double pending_flops = 0.0;
    std::uint64_t pending_tasks = 0;
    for (const auto& unit : schedule.units) {
      WorkItem item = item_of(unit.tasks, unit.seconds);
      pending_flops += item.flops;
      pending_tasks += item.tasks.size();
      work.push_back(std::move(item));
    }
    summary.units = schedule.units.size();
    summary.skipped = in_shard - pending_tasks - possible_tasks;
    // Released replicates, one unit per bundle they belong to (tasks of one replicate, T and d share
    // their random tensors wherever they run).
    std::vector<std::size_t> bundle_of(rule ? plan.tasks.size() : 0);
    for (std::size_t i = 0; rule && i < plan.bundles.size(); ++i)
      for (const auto id : plan.bundles[i].tasks) bundle_of[id] = i;
    const auto make_units = [&](const TaskList& released) {
      std::map<std::size_t, TaskList> by_bundle;
      for (const auto id : released)
        if (runnable(id)) by_bundle[bundle_of[id]].push_back(id);
      std::vector<WorkItem> items;
      for (auto& [b, tasks] : by_bundle) {
        std::sort(tasks.begin(), tasks.end());
        const double s = plan::bundle_work(plan, tasks, rates).seconds();
        items.push_back(item_of(std::move(tasks), s));
      }
      return items;
    };
    if (opt.progress) {
      const std::string threads = opt.threads > 1 ? " x " + std::to_string(opt.threads) + " threads" : std::string();
      const std::string more = possible_tasks > 0 ? " (+ up to " + std::to_string(possible_tasks) +
                                                        " replicates as the targets need them)"
                                                  : std::string();
      std::fprintf(stderr,
                   "[rcsweep] %s %s: %llu tasks%s in %zu bundles to run on %d rank%s%s (%llu already finished)\n",
                   summary.resumed ? "resuming" : "writing", opt.output.c_str(),
                   static_cast<unsigned long long>(pending_tasks), more.c_str(), pending.size(), size,
                   size == 1 ? "" : "s", threads.c_str(), static_cast<unsigned long long>(summary.skipped));
      if (size > 1) std::fprintf(stderr, "[rcsweep] ranks %d: %s\n", size, plan::describe(schedule).c_str());
      if (const auto warning = plan::idle_warning(schedule, pending); !warning.empty())
        std::fprintf(stderr, "[rcsweep] warning: %s\n", warning.c_str());
    }

    // Phase 3: compute here while the service thread feeds the workers and writes results.
    WorkQueue queue(plan, std::move(work), deadline, rule.has_value());
    ResultQueue local;
    StopState stop;
    std::atomic<bool> local_finished{false};
    std::exception_ptr service_error;
    Service service(plan, *store, queue, local, stop, comm, opt, pending_flops + possible_flops,
                    pending_tasks + possible_tasks, summary, std::move(rank_platform), rule ? &*rule : nullptr,
                    make_units, status);
    std::thread service_thread([&] {
      try {
        service.run(local_finished);
      } catch (...) {
        service_error = std::current_exception();
        queue.stop();
      }
    });
    // run_bundle asks `cancelled` before every layer and every task's gradients: counting the
    // calls gives rank 0's progress within a bundle (a single big task shows its ETA too).
    double bundle_flops = 0.0, checks = 0.0, expected_checks = 1.0;
    const auto cancelled = [&] {
      checks += 1.0;
      service.partial_progress(bundle_flops * std::min(1.0, checks / expected_checks));
      return stop.past_grace();
    };
    const double grad_checks = plan.gradient_depths().empty() ? 0.0 : 1.0;
    try {
      while (auto tasks = queue.pop()) {
        ++summary.bundles;
        bundle_flops = 0.0;
        for (const auto id : *tasks) bundle_flops += plan.tasks[id].flops;
        checks = 0.0;
        expected_checks = plan.max_depth + grad_checks * static_cast<double>(tasks->size()) + 1.0;
        local.push(compute(runner, plan, *tasks, 0, cancelled));
        service.partial_progress(0.0);
      }
    } catch (const std::exception& e) {  // outside a bundle (out of memory): the job ends now, as after a kill
      std::fprintf(stderr, "[rank 0/%d] error: %s\n", size,
                   is_out_of_memory(e) ? out_of_memory_message("handing results over", e, 0.0).c_str() : e.what());
      std::fflush(stderr);
      if (size > 1) MPI_Abort(comm, 1);
      std::_Exit(1);
    }
    local_finished = true;
    service_thread.join();
    if (service_error) std::rethrow_exception(service_error);

    // Phase 4: final state of the whole store; "finished" only when this run's shard is complete.
    const auto final_status = store->task_status();
    for (const auto s : final_status) {
      summary.store_failed += s == store::TaskStatus::failed;
      summary.store_diverged += s == store::TaskStatus::diverged;
      summary.store_vanished += s == store::TaskStatus::vanished;
    }
    for (const auto& b : plan.bundles)
      for (const auto id : b.tasks) summary.store_pending += final_status[id] == store::TaskStatus::pending;
    summary.stop_signal = stop.signal;
    summary.time_limited = queue.time_limited();
    if (summary.store_pending == 0) store->mark_finished(utc_now());
    if (!launcher_gone()) store->sync();  // else every batch is flushed to the OS already; exit soon
    store.reset();                        // closed (and its lock released) before the others are told
  }
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Without a launcher each rank ends on its own; only rank 0 knows the store. While the launcher
  // tears the job down, rank 0 ends once the store is closed, without handing out the exit code (a
  // rank may be dead with its node; mpiexec exits 1 anyway). The workers wait for it: when one
  // rank exits, Open MPI kills the others at once, so a worker must not end before rank 0.
  const auto ended_alone = [&] {
    summary.launcher_gone = launcher_gone() || workers_lost();
    if (rank != 0) {
      summary.stop_signal = stop_signal();
      summary.store_pending = 1;  // unknown here; the run did stop early
    }
    return summary;
  };
  if (launcher_gone() || workers_lost() || (rank == 0 && launcher_teardown())) return ended_alone();
  // Every rank returns the same exit code. Workers that finished early wait without spinning
  // (a blocking MPI_Bcast busy-polls and would steal the core of a rank still computing). If the
  // launcher dies meanwhile, the others may never join: the buffer is left to MPI (leaked).
  constexpr int n_counts = 6;
  auto counts = std::make_unique<std::uint64_t[]>(n_counts);
  counts[0] = summary.store_failed;
  counts[1] = summary.store_diverged;
  counts[2] = summary.store_pending;
  counts[3] = static_cast<std::uint64_t>(summary.stop_signal);
  counts[4] = summary.time_limited ? 1u : 0u;
  counts[5] = summary.store_vanished;
  MPI_Request request;
  mpi::check(MPI_Ibcast(counts.get(), n_counts, MPI_UINT64_T, 0, comm, &request), "MPI_Ibcast");
  for (int done = 0;;) {
    mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    if (launcher_gone()) {
      counts.release();
      return ended_alone();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (rank != 0) take_cancel(comm);  // a cancel that crossed this rank's last result: drop it
  summary.store_failed = counts[0];
  summary.store_diverged = counts[1];
  summary.store_pending = counts[2];
  summary.stop_signal = static_cast<int>(counts[3]);
  summary.time_limited = counts[4] != 0;
  summary.store_vanished = counts[5];
  return summary;
}

}  // namespace rcsweep::sweep
