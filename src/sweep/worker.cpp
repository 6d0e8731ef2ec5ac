#include "sweep/worker.hpp"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "base/platform.hpp"
#include "sweep/protocol.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::sweep {

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

namespace {

/// One worker's side of the farm's messages (protocol.hpp).
class Worker {
 public:
  Worker(const RunOptions& opt, MPI_Comm comm) : opt_(opt), comm_(comm) {}

  /// Heartbeats tell rank 0 that this rank and its node live (Service::listen_for_heartbeats):
  /// between the layers of a bundle and while waiting for the next one. Never waited for.
  void beat() {
    if (seconds_since(beaten_) < beat_s) return;
    beaten_ = steady::now();
    send_beat(comm_);
  }

  /// A bundle is abandoned when this rank's own grace period is over, rank 0 says so or the launcher died.
  bool cancelled() {
    beat();
    return launcher_gone() || (stop_signal() != 0 && seconds_since_stop_signal() > effective_grace(opt_.grace_s)) ||
           take_cancel(comm_);
  }

  /// This rank's stop signal, or `leaving` once its launcher is gone, and the results of its last
  /// bundle. Without a launcher rank 0 may be gone too: neither the hand-over nor the answer is
  /// waited for without bound (a blocking send of a large message would wait forever). False: the
  /// hand-over was given up.
  bool hand_over() {
    const std::int32_t sig = launcher_gone() ? leaving : stop_signal();
    left_ = sig == leaving;
    ResultSend send = send_results(comm_, sig, results_);
    for (;;) {
      if (send.done()) return true;
      if (!gone_at_ && launcher_gone()) gone_at_ = steady::now();
      if (gone_at_ && seconds_since(*gone_at_) > gone_send_s) return false;  // `send` leaves its bytes to MPI
    }
  }

  /// Once the launcher is gone, rank 0 answers no more: the worker's last message says `leaving`
  /// (also after results sent just before it noticed, which rank 0 may have answered with a bundle).
  void leave() {
    if (left_) return;
    results_.clear();
    hand_over();
  }

  /// Rank 0's answer: the next unit (empty: stop). Nothing: the launcher is gone (the worker left).
  std::optional<TaskList> next_unit() {
    for (;;) {
      if (auto tasks = poll_assignment(comm_)) return tasks;
      if (launcher_gone()) {
        leave();
        return std::nullopt;
      }
      beat();
    }
  }

  /// The results of the next hand-over.
  void set_results(std::vector<store::TaskResult> results) { results_ = std::move(results); }

 private:
  const RunOptions& opt_;
  MPI_Comm comm_;
  steady::time_point beaten_ = steady::now();
  std::vector<store::TaskResult> results_;
  bool left_ = false;                          // the last hand-over said `leaving`
  std::optional<steady::time_point> gone_at_;  // when this rank saw its launcher gone: waits end gone_send_s later
};

}  // namespace

void run_worker(const BundleRunner& runner, const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, int rank,
                RunSummary& summary) {
  Worker worker(opt, comm);
  const std::function<bool()> cancelled = [&] { return worker.cancelled(); };
  for (;;) {
    const auto sent = steady::now();
    if (!worker.hand_over()) return;
    if (launcher_gone()) return worker.leave();
    const auto tasks = worker.next_unit();
    if (!tasks) return;
    if (summary.bundles > 0) {  // the first request waits for the start-up, not for a hand-out
      const double waited = std::chrono::duration<double>(steady::now() - sent).count();
      summary.wait_s += waited;
      summary.max_wait_s = std::max(summary.max_wait_s, waited);
    }
    if (tasks->empty()) return;
    ++summary.bundles;
    worker.set_results(compute(runner, plan, *tasks, rank, cancelled));
  }
}

}  // namespace rcsweep::sweep
