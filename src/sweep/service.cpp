#include "sweep/service.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <string>
#include <thread>
#include <utility>

#include "base/error.hpp"
#include "metrics/metrics.hpp"
#include "sweep/decisions.hpp"
#include "sweep/events.hpp"
#include "sweep/mpi.hpp"
#include "sweep/protocol.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::sweep {
namespace {

/// A worker's heartbeats come between the layers of its bundle: rank 0 waits for one at least
/// RunOptions::silence_s, and 10 times a layer of the bundle at 1 GFLOP/s (a slow rate for any
/// layer), before it takes the worker for lost.
constexpr double silent_layer_factor = 10.0 / 1e9;
/// Rank 0 was itself not running between two polls of its loop for this share of
/// RunOptions::silence_s (the job stopped, its machine or VM paused): the workers' silence over
/// that time proves nothing, they were most likely paused with it.
constexpr double paused_share = 0.25;
// When the launcher tears the job down (its SIGTERM: SIGKILL follows at least 1 s after the grace
// period, stop.hpp), rank 0 waits this long after the grace period for workers that have not
// reported: a worker whose node failed never does, and the store must be closed before the SIGKILL.
constexpr double teardown_collect_s = 0.5;

}  // namespace

void ResultQueue::push(std::vector<store::TaskResult> results) {
  std::lock_guard lock(mutex_);
  for (auto& r : results) items_.push_back(std::move(r));
}

std::vector<store::TaskResult> ResultQueue::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(items_, {});
}

Service::Service(ServiceContext context)
    : c_(std::move(context)),
      n_workers_(mpi::comm_size(c_.comm) - 1),
      busy_(static_cast<std::size_t>(n_workers_) + 1, false),
      cancelled_(busy_),
      stopped_(busy_),
      progress_(c_.progress_flops, c_.progress_tasks, c_.opt.events, c_.opt.progress_interval_s),
      heard_(busy_.size(), steady::now()),
      patience_s_(busy_.size(), c_.opt.silence_s),
      polled_(steady::now()),
      continued_(times_continued()) {
  if (c_.rule) progress_.total_is_bound();
}

void Service::run(const std::atomic<bool>& local_finished) {
  auto last_write = steady::now(), last_sync = last_write;
  std::vector<store::TaskResult> batch;
  for (;;) {
    const bool was_empty = batch.empty();
    watch_stop();
    bool busy = collect(batch);
    const bool local_done = local_finished.load();
    auto mine = c_.local.take();
    busy = busy || !mine.empty();
    for (auto& r : mine) batch.push_back(std::move(r));
    if (was_empty && !batch.empty()) oldest_ = steady::now();  // the batch's first arrival
    const bool done = finished(local_done);
    const auto now = steady::now();
    // Adaptive replicates: results may release work; write at once when none is left to hand out.
    if (!batch.empty() && (done || (c_.rule && c_.work.empty()) ||
                           std::chrono::duration<double>(now - last_write).count() >= c_.opt.write_interval_s)) {
      write(batch);
      last_write = now;
    }
    // H5Fflush hands the data to the OS; an fsync now and then also survives a node crash.
    if (!gone_ && std::chrono::duration<double>(now - last_sync).count() >= c_.opt.sync_interval_s) {
      guard_io([&] { c_.store.sync(); });
      last_sync = now;
    }
    progress_.report();
    if (done) break;
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // idle: leave the core to compute
  }
  progress_.report(true);
}

/// The launcher, the heartbeats and the stop signals, then the grace period.
void Service::watch_stop() {
  if (!gone_ && launcher_gone()) launcher_died();
  if (!gone_) listen_for_heartbeats();
  if (c_.stop.signal == 0 && stop_signal() != 0) begin_stop(stop_signal());
  if (c_.stop.signal != 0) update_grace();
  // Past the grace period rank 0 cancels the workers' bundles, unless the launcher tears the
  // job down: then every rank got its SIGTERM and abandons its bundle itself, and a message
  // to a rank whose node failed would block rank 0 (Open MPI's TCP transport reports the failed
  // connection through the launcher, which no longer answers).
  if (c_.stop.signal != 0 && c_.stop.past_grace() && !gone_) {
    if (!launcher_teardown()) cancel_busy_workers();
    if (!past_grace_at_) past_grace_at_ = steady::now();
  }
}

/// Serve every worker that is waiting (each has at most one message out) before the next write:
/// after a long write they all get their next bundle at once, and their results share one batch,
/// so batching holds even when writes take longer than the interval. True: some were served.
bool Service::collect(std::vector<store::TaskResult>& batch) {
  bool busy = false;
  for (int i = 0; i < n_workers_ && serve_one_worker(batch); ++i) busy = true;
  if (!parked_.empty()) busy = serve_parked() || busy;
  return busy;
}

/// Rank 0 has computed its last unit (`local_done`) and the workers have all been told to stop.
/// Without a launcher, or while it tears the job down, workers that have not reported by now are
/// not waited for (they may be dead).
bool Service::finished(bool local_done) const {
  return local_done &&
         (n_stopped_ == n_workers_ || (gone_ && seconds_since(gone_at_) >= gone_collect_s) ||
          (launcher_teardown() && past_grace_at_ && seconds_since(*past_grace_at_) >= teardown_collect_s));
}

bool Service::serve_one_worker(std::vector<store::TaskResult>& batch) {
  if (n_workers_ == 0) return false;
  auto from = poll_results(c_.comm);
  if (!from) return false;
  const std::int32_t worker_signal = from->message.signal;
  for (auto& r : from->message.results) batch.push_back(std::move(r));
  const auto w = static_cast<std::size_t>(from->rank);
  heard_[w] = steady::now();
  if (gone_ || worker_signal == leaving) {  // the worker's last message: it does not wait for an answer
    busy_[w] = false;
    stop_worker(w);
    return true;
  }
  if (worker_signal > 0 && c_.stop.signal == 0) begin_stop(worker_signal);
  busy_[w] = false;
  if (!assign(w)) parked_.push_back(w);  // results still to come may give it work
  return true;
}

/// Send worker `w` its next unit, or tell it to stop; false when it has to wait for results.
bool Service::assign(std::size_t w) {
  bool wait = false;
  const TaskList next = c_.work.try_pop(wait).value_or(TaskList{});
  if (wait) return false;
  busy_[w] = !next.empty();
  double layer_flops = 0.0;
  for (const auto id : next) layer_flops += c_.plan.tasks[id].flops / (c_.plan.max_depth + 1);
  heard_[w] = steady::now();
  patience_s_[w] = std::max(c_.opt.silence_s, silent_layer_factor * layer_flops);
  if (next.empty()) stop_worker(w);
  send_assignment(c_.comm, static_cast<int>(w), next);
  return true;
}

/// Workers waiting for work that results may release: served once there is some (or none can come).
bool Service::serve_parked() {
  const auto before = parked_.size();
  std::erase_if(parked_, [&](std::size_t w) { return assign(w); });
  return parked_.size() != before;
}

/// A failed write (a full disk, a lost file system) ends the run: say what is safe and what to do.
template <class F>
void Service::guard_io(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    const std::string what = e.what();
    const bool full = store::is_disk_full(what);
    throw StoreError("cannot write " + c_.opt.output.string() + (full ? ": the disk is full" : "") + " (" + what +
                     "). Every task marked done in the store is safe; " +
                     (full ? "free space and run" : "fix the cause and run") + " the same command to resume.");
  }
}

/// A stop signal on any rank: no new bundles; running ones get the grace period (cut short when
/// the launcher is about to kill the job).
void Service::begin_stop(int sig) {
  const double grace = effective_grace(c_.opt.grace_s);
  c_.store.note_stopping();
  c_.work.stop();
  stop_at_ = steady::now();
  update_grace();
  c_.stop.signal = sig;
  const bool teardown = launcher_teardown();
  report(c_.opt.events, event::Stopping{signal_name(sig), teardown ? launcher_name() : std::string(), grace,
                                        teardown                          ? std::string()
                                        : sig == SIGINT || sig == SIGTERM ? "the same signal again"
                                                                          : "a SIGINT or SIGTERM"});
}

/// The launcher died (or the workers are lost): nobody waits for this run. Stop at once, take
/// what the workers send within gone_collect_s, write it and end.
void Service::launcher_died() {
  c_.store.note_stopping();
  gone_ = true;
  gone_at_ = steady::now();
  c_.work.stop();
  c_.stop.abandon_at = gone_at_.time_since_epoch().count();
  if (c_.stop.signal == 0) {
    stop_at_ = gone_at_;
    c_.stop.signal = stop_signal() != 0 ? stop_signal() : SIGHUP;
  }
  if (!workers_lost()) report(c_.opt.events, event::LauncherGone{launcher_name()});
}

/// The layer where a diverged or vanished task ended: the first without a finite log ||X||_F.
void Service::note_ended(const store::TaskResult& r) {
  constexpr auto log_fro = metrics::metric_index("log_fro");
  int at = 0;
  while (at < static_cast<int>(r.layers.size()) && std::isfinite(r.layers[static_cast<std::size_t>(at)][log_fro])) ++at;
  auto& s = c_.summary;
  s.ended_first_layer = s.ended_first_layer < 0 ? at : std::min(s.ended_first_layer, at);
  s.ended_last_layer = std::max(s.ended_last_layer, at);
}

/// Heartbeats of the workers; a worker still expected to speak (not told to stop) that has been
/// silent for longer than its patience is lost: then this rank's node (or the network between
/// them) failed, and no launcher will end the run: end it as if the launcher were gone.
/// A pause of the job is not a failure: when this rank was stopped and continued (SIGCONT), or
/// its loop was not run for a while (a paused VM: no SIGCONT, the monotonic clock jumps; one
/// that stands still during a pause counts no silence), every worker gets a fresh window.
void Service::listen_for_heartbeats() {
  if (n_workers_ == 0) return;
  const auto now = steady::now();
  const double gap = std::chrono::duration<double>(now - polled_).count();
  polled_ = now;
  if (const unsigned continued = times_continued(); continued != continued_ || gap > paused_share * c_.opt.silence_s) {
    continued_ = continued;
    std::fill(heard_.begin(), heard_.end(), now);
    if (gap >= 1.0) report(c_.opt.events, event::Paused{gap});
  }
  for (const int w : take_beats(c_.comm)) heard_[static_cast<std::size_t>(w)] = steady::now();
  for (int w = 1; w <= n_workers_; ++w) {
    const auto i = static_cast<std::size_t>(w);
    if (stopped_[i] || seconds_since(heard_[i]) <= patience_s_[i]) continue;
    const double silent = seconds_since(heard_[i]);
    note_workers_lost();
    c_.summary.lost_rank = w;
    launcher_died();
    report(c_.opt.events,
           event::RankLost{w, i < c_.rank_platform.size() ? c_.rank_platform[i].host : std::string("?"), silent});
    return;
  }
}

/// Running bundles are abandoned `effective_grace` after the stop began. It shrinks when the
/// launcher's SIGTERM or death comes after the stop began (a worker's signal may come first).
void Service::update_grace() {
  const auto at = stop_at_ + std::chrono::duration_cast<steady::duration>(
                                 std::chrono::duration<double>(effective_grace(c_.opt.grace_s)));
  c_.stop.abandon_at = std::min(c_.stop.abandon_at.load(), at.time_since_epoch().count());
}

void Service::stop_worker(std::size_t w) {
  if (!stopped_[w]) ++n_stopped_;
  stopped_[w] = true;
}

/// Grace period over: tell the workers still computing to abandon their bundles.
void Service::cancel_busy_workers() {
  for (int w = 1; w <= n_workers_; ++w) {
    const auto i = static_cast<std::size_t>(w);
    if (!busy_[i] || cancelled_[i]) continue;
    send_cancel(c_.comm, w);
    cancelled_[i] = true;
  }
}

void Service::write(std::vector<store::TaskResult>& batch) {
  for (auto& r : batch)
    if (r.rank >= 0 && static_cast<std::size_t>(r.rank) < c_.rank_platform.size())
      r.platform = c_.rank_platform[static_cast<std::size_t>(r.rank)];
  const auto start = steady::now();
  guard_io([&] { c_.store.write(batch); });
  const auto end = steady::now();
  auto& s = c_.summary;
  s.write_s += std::chrono::duration<double>(end - start).count();
  ++s.write_batches;
  s.max_batch = std::max<std::uint64_t>(s.max_batch, batch.size());
  s.max_write_latency_s = std::max(s.max_write_latency_s, std::chrono::duration<double>(end - oldest_).count());
  for (const auto& r : batch) count(r);
  if (c_.rule) decide(batch);
  c_.work.written(batch.size());  // after decide's push: an empty queue must not look final before
  batch.clear();
}

/// A written result: its progress, its time (the time limit's estimates) and its outcome.
void Service::count(const store::TaskResult& r) {
  progress_.add(c_.plan.tasks[r.task].flops);
  switch (r.status) {
    case store::TaskStatus::done:
      ++c_.summary.done;
      c_.work.calibrate(r.task, r.wall_s);
      return;
    case store::TaskStatus::failed: ++c_.summary.failed; break;
    case store::TaskStatus::diverged:
      ++c_.summary.diverged;
      note_ended(r);
      break;
    case store::TaskStatus::vanished:
      ++c_.summary.vanished;
      note_ended(r);
      break;
    case store::TaskStatus::pending:
    case store::TaskStatus::not_needed: return;  // not results of a computation
  }
  report(c_.opt.events, event::TaskEnded{r.task, store::to_string(r.status), r.message});
}

/// Adaptive replicates: the decisions the written results allow. Replicates not needed are
/// recorded as such (and leave the progress total); released ones are handed out as units.
void Service::decide(const std::vector<store::TaskResult>& batch) {
  const Decided d = sweep::decide(*c_.rule, c_.plan, c_.status_at_start, batch);
  if (!d.not_needed.empty()) {
    guard_io([&] { c_.store.write(d.not_needed); });
    for (const auto& r : d.not_needed) progress_.drop(c_.plan.tasks[r.task].flops);
    c_.summary.not_needed += d.not_needed.size();
  }
  if (!d.released.empty()) c_.work.push(c_.make_units(d.released));
}

}  // namespace rcsweep::sweep
