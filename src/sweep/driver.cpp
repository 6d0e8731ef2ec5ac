#include "sweep/driver.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "base/parallel.hpp"
#include "config/overrides.hpp"
#include "linalg/linalg.hpp"
#include "models/task_runner.hpp"
#include "plan/adaptive.hpp"
#include "plan/bundle_job.hpp"
#include "rcsweep/version.hpp"
#include "store/file_mode.hpp"
#include "store/reuse.hpp"
#include "store/store.hpp"
#include "sweep/decisions.hpp"
#include "sweep/farm.hpp"
#include "sweep/mpi.hpp"
#include "sweep/events.hpp"
#include "sweep/provenance.hpp"
#include "sweep/service.hpp"
#include "sweep/stop.hpp"
#include "sweep/units.hpp"
#include "sweep/work_queue.hpp"
#include "sweep/worker.hpp"

namespace rcsweep::sweep {
namespace {

/// How long a new run waits for a run that is stopping to let go of the store's writer lock (its
/// ranks flush and exit within about a second after a killed launcher; a grace period is longer).
constexpr double stopping_wait_s = 10.0;

/// What every phase of a run works with.
struct RunContext {
  const plan::Plan& plan;
  const RunOptions& opt;
  MPI_Comm comm;
  const BundleRunner& runner;
  int rank = 0, size = 1;
  std::optional<steady::time_point> deadline;  ///< no unit is started that would overrun it
  RunSummary& summary;
};

/// The time limit: --time-limit from `t0`, or the scheduler's end of the job less a minute for
/// the final flush and the MPI teardown, whichever comes first.
std::optional<steady::time_point> run_deadline(steady::time_point t0, double time_limit_s) {
  std::optional<steady::time_point> deadline;
  if (time_limit_s > 0)
    deadline = t0 + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(time_limit_s));
  if (const auto end = scheduler_end_time()) {
    const auto left = std::chrono::duration_cast<steady::duration>(*end - std::chrono::system_clock::now() -
                                                                   std::chrono::seconds(60));
    if (!deadline || t0 + left < *deadline) deadline = t0 + left;
  }
  return deadline;
}

/// Every rank's platform, at rank 0: the store records it per task (results are bitwise
/// reproducible on one BLAS kernel only; the host says which node computed it).
std::vector<store::Platform> gather_platforms(MPI_Comm comm) {
  std::vector<store::Platform> platforms;
  for (const auto& text : mpi::gather(platform_text(), 0, comm)) platforms.push_back(parse_platform(text));
  return platforms;
}

/// --reuse of a store none of whose results fits this sweep is a mistake: say why, before any work.
void refuse_unusable(const std::filesystem::path& from, const plan::Plan& plan) {
  const auto r = store::compare_with_store(from, plan);
  if (!r.blockers.empty())
    throw StoreError("--reuse " + from.string() + ": none of its results fits this sweep (sweep '" + r.from_name +
                     "', plan hash " + r.from_hash + " -> " + plan.hash + "):\n" + store::describe(r) +
                     "drop --reuse " + from.string());
}

/// The --reuse stores, checked before anything is written: not the output itself, and usable.
void check_reuse_sources(const RunOptions& opt, const store::WriterLock& lock, const plan::Plan& plan) {
  for (const auto& from : opt.reuse) {
    if (store::same_file(from, lock.path()))
      throw StoreError("--reuse " + from.string() + " is the output store itself; --reuse copies from another store");
    refuse_unusable(from, plan);
  }
}

/// Refuse the growth of the store at `path` (of another plan) to `plan` when a finished result of
/// it would be lost, decided from what compare_with_store reads, without writing. store::grow_in_place
/// refuses the same stores; the run refuses them here first, and so does check_store, in one message.
void check_growth(const std::filesystem::path& path, const plan::Plan& plan) {
  const auto r = store::compare_with_store(path, plan);
  if (r.blockers.empty() && r.not_in_sweep == 0 && r.other_shards == 0) return;
  const std::string why =
      !r.blockers.empty() ? "none of its results fits this sweep"
      : r.not_in_sweep > 0
          ? std::to_string(r.not_in_sweep) + " of its " + std::to_string(r.finished) +
                " finished tasks are not tasks of this sweep"
          : std::to_string(r.other_shards) + " of its " + std::to_string(r.finished) +
                " finished tasks belong to other shards of the grown sweep (merge the shards, grow the merged "
                "store, or --reuse it into each new shard's store)";
  const auto line = [](const std::vector<std::string>& o) {
    return o.empty() ? std::string("none") : config::overrides_line(o);
  };
  const auto stored = store::read_info(path).overrides;
  const bool overridden = !stored.empty() || !plan.spec.overrides.empty();
  const std::string overrides = overridden ? "; the store's overrides: " + line(stored) +
                                                 ", this run's: " + line(plan.spec.overrides)
                                           : std::string();
  const std::string p = path.string();
  throw StoreError(
      p + " (sweep '" + r.from_name + "', plan hash " + r.from_hash + ") was made from a different sweep file" +
      (overridden ? " or command-line overrides" : "") + " (plan hash " + plan.hash + overrides + "), and " + why +
      ", so it is not grown in place:\n" + store::describe(r) + "write a new store (another -o" +
      (r.blockers.empty() ? "; add --reuse " + p + " to copy what fits" : std::string()) + ") or pass --overwrite");
}

/// Open the existing store (grown first when it was made from another version of the sweep
/// file) or create it; `exists`: a store is at opt.output.
store::Store open_or_create(const RunContext& c, const store::WriterLock& lock, const store::Provenance& prov,
                            bool exists) {
  const auto& opt = c.opt;
  if (!exists || opt.overwrite) return store::Store::create(lock, c.plan, prov, opt.overwrite);
  if (store::read_info(opt.output).plan_hash != c.plan.hash) {
    check_growth(opt.output, c.plan);
    const auto grown = store::grow_in_place(lock, c.plan, prov);
    report(opt.events, event::StoreGrown{opt.output.string(), store::describe(grown), grown.copied});
  }
  store::Store store = store::Store::open_resume(lock, c.plan, prov);
  c.summary.resumed = true;
  return store;
}

/// --reuse: the finished results of other stores copied into the pending tasks they fit
/// (store/reuse.hpp), before any work.
void reuse(const RunContext& c, store::Store& store) {
  for (const auto& from : c.opt.reuse) {
    const auto r = store::reuse_results(from, store, c.plan);
    report(c.opt.events, event::Reused{from.string(), r.copied, r.not_in_sweep, r.other_shards});
  }
}

/// The store's writer lock. A run that is stopping (killed launcher, a signal) lets go within
/// seconds: wait for it, saying so.
store::WriterLock claim(const RunOptions& opt) {
  return store::WriterLock::acquire(opt.output, stopping_wait_s, [&](const std::string& holder) {
    report(opt.events, event::WaitingForStore{opt.output.string(), holder, stopping_wait_s});
  });
}

/// With the store claimed, before anything is written: --resume needs a store, and the --reuse
/// stores must be usable. Returns whether a store is at opt.output.
bool check_claimed(const RunOptions& opt, const store::WriterLock& lock, const plan::Plan& plan) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(std::filesystem::symlink_status(lock.path(), ec));
  if (opt.require_existing && !exists)
    throw StoreError(opt.output.string() + " does not exist: nothing to resume (drop --resume to start it)");
  check_reuse_sources(opt, lock, plan);
  return exists;
}

/// Rank 0: take the writer lock, then open or create the store and copy the --reuse results.
store::Store open_store(const RunContext& c) {
  const auto& opt = c.opt;
  store::Provenance prov{version, git_commit, utc_now(),   hostname(),      linalg::blas_info(),
                         "",      c.size,     opt.threads, opt.blas_threads};
  // The store's one writer from here to the end of the run (docs/GUARANTEES.md).
  const store::WriterLock lock = claim(opt);
  const bool exists = check_claimed(opt, lock, c.plan);
  store::Store store = open_or_create(c, lock, prov, exists);
  if (!lock.enforced()) report(opt.events, event::NoFlock{opt.output.string(), store::hdf5_file_locking_off()});
  reuse(c, store);
  return store;
}

/// Phase 1: rank 0 opens or creates the store; every rank learns whether that worked (else
/// StoreRefused on every rank).
std::optional<store::Store> open_store_everywhere(const RunContext& c) {
  std::optional<store::Store> store;
  std::string error;
  if (c.rank == 0) {
    try {
      store.emplace(open_store(c));
    } catch (const std::exception& e) {
      error = is_out_of_memory(e) ? out_of_memory_message("opening the store", e, 0.0) : e.what();
    }
  }
  error = mpi::bcast(error, 0, c.comm);
  if (!error.empty()) throw StoreRefused(error);
  return store;
}

/// Phase 2 (rank 0), adaptive replicates: the decisions the store's finished tasks allow already
/// (replayed on a resume); only the replicates needed so far run now, the others when results
/// release them. Nothing without adaptive replicates.
std::optional<plan::ReplicateRule> replay(const RunContext& c, store::Store& store,
                                          const std::vector<store::TaskStatus>& status) {
  if (!c.plan.spec.adaptive.enabled()) return std::nullopt;
  return replay_decisions(c.plan, store, status, c.opt.retry_failed);
}

/// Phase 3 (rank 0): the pending work (with --retry-failed also failed, diverged and vanished
/// tasks), largest unit first, and what this run says about it.
PendingWork schedule(const RunContext& c, const Runnable& runnable, const plan::ReplicateRule* rule,
                     const UnitPricer& pricer) {
  PendingWork w = pending_work(c.plan, runnable, rule, pricer, c.size);
  c.summary.units = w.schedule.units.size();
  c.summary.skipped = w.skipped();
  report(c.opt.events, event::Started{.store = c.opt.output.string(),
                                      .resumed = c.summary.resumed,
                                      .tasks = w.tasks,
                                      .possible_tasks = w.possible_tasks,
                                      .bundles = w.bundles.size(),
                                      .ranks = c.size,
                                      .threads = c.opt.threads,
                                      .already_finished = c.summary.skipped,
                                      .schedule = c.size > 1 ? plan::describe(w.schedule) : std::string()});
  if (const auto warning = plan::idle_warning(w.schedule, w.bundles); !warning.empty())
    report(c.opt.events, event::Warning{warning});
  return w;
}

/// Rank 0's compute thread: units from `queue` until there are none, results to `local`. run_bundle
/// asks `cancelled` models::checks_per_layer times per layer (before it and within it) and before
/// every task's gradients: counting the calls gives rank 0's progress within a bundle, also within
/// a layer (a single big task shows its ETA too). Outside a bundle (out of
/// memory) an error is reported (event::Fatal) and ends the job at once, as after a kill.
void compute_at_rank0(const RunContext& c, WorkQueue& queue, ResultQueue& local, const StopState& stop,
                      Service& service) {
  double bundle_flops = 0.0, checks = 0.0, expected_checks = 1.0;
  const auto cancelled = [&] {
    checks += 1.0;
    service.partial_progress(bundle_flops * std::min(1.0, checks / expected_checks));
    return stop.past_grace();
  };
  const double grad_checks = c.plan.gradient_depths().empty() ? 0.0 : 1.0;
  try {
    while (auto tasks = queue.pop()) {
      ++c.summary.bundles;
      bundle_flops = 0.0;
      for (const auto id : *tasks) bundle_flops += c.plan.tasks[id].flops;
      checks = 0.0;
      expected_checks = c.plan.max_depth * models::checks_per_layer + grad_checks * static_cast<double>(tasks->size()) +
                        1.0;
      local.push(compute(c.runner, c.plan, *tasks, 0, cancelled));
      service.partial_progress(0.0);
    }
  } catch (const std::exception& e) {
    try {  // the sink has written it when it returns (event::Fatal)
      report(
          c.opt.events,
          event::Fatal{c.size, is_out_of_memory(e) ? out_of_memory_message("handing results over", e, 0.0) : e.what()});
    } catch (...) {  // no memory left even for that: the exit code says it
    }
    if (c.size > 1) MPI_Abort(c.comm, 1);
    std::_Exit(1);
  }
}

/// Phase 4 (rank 0): compute here while the service thread feeds the workers and writes results.
void serve_and_work(const RunContext& c, Service& service, WorkQueue& queue, ResultQueue& local,
                    const StopState& stop) {
  std::atomic<bool> local_finished{false};
  std::exception_ptr service_error;
  std::thread service_thread([&] {
    try {
      service.run(local_finished);
    } catch (...) {
      service_error = std::current_exception();
      queue.stop();
    }
  });
  compute_at_rank0(c, queue, local, stop, service);
  local_finished = true;
  service_thread.join();
  if (service_error) std::rethrow_exception(service_error);
}

/// Phase 5 (rank 0): the final state of the whole store; "finished" only when this run's shard is
/// complete. The store is closed (and its lock released) before the others are told.
void finish(const RunContext& c, std::optional<store::Store>& store, const StopState& stop, WorkQueue& queue) {
  auto& summary = c.summary;
  const auto final_status = store->task_status();
  for (const auto s : final_status) {
    summary.store_failed += s == store::TaskStatus::failed;
    summary.store_diverged += s == store::TaskStatus::diverged;
    summary.store_vanished += s == store::TaskStatus::vanished;
  }
  for (const auto& b : c.plan.bundles)
    for (const auto id : b.tasks) summary.store_pending += final_status[id] == store::TaskStatus::pending;
  summary.stop_signal = stop.signal;
  summary.time_limited = queue.time_limited();
  if (summary.store_pending == 0) store->mark_finished(utc_now());
  if (!launcher_gone()) store->sync();  // else every batch is flushed to the OS already; exit soon
  store.reset();
}

/// Rank 0 after the store is open: replay, schedule, serve and work, finish.
void run_rank0(const RunContext& c, std::optional<store::Store>& store, std::vector<store::Platform> platforms) {
  const auto status = store->task_status();
  const Runnable runnable{status, c.opt.retry_failed};
  std::optional<plan::ReplicateRule> rule = replay(c, *store, status);
  // The units handed out: whole bundles, or slices of bundles where that shortens the estimated
  // makespan on `size` ranks (plan/schedule.hpp), priced at this machine's rates or rough ones.
  const UnitPricer pricer{c.plan, c.opt.calibration, c.opt.assumed_flop_rate};
  PendingWork work = schedule(c, runnable, rule ? &*rule : nullptr, pricer);
  WorkQueue queue(c.plan, std::move(work.units), c.deadline, rule.has_value());
  ResultQueue local;
  StopState stop;
  std::function<std::vector<WorkItem>(const TaskList&)> make_units;
  if (rule) make_units = ReleasedUnits(c.plan, runnable, pricer);
  Service service({.plan = c.plan,
                   .opt = c.opt,
                   .comm = c.comm,
                   .store = *store,
                   .work = queue,
                   .local = local,
                   .stop = stop,
                   .summary = c.summary,
                   .rank_platform = std::move(platforms),
                   .progress_flops = work.flops + work.possible_flops,
                   .progress_tasks = work.tasks + work.possible_tasks,
                   .rule = rule ? &*rule : nullptr,
                   .make_units = std::move(make_units),
                   .status_at_start = status});
  serve_and_work(c, service, queue, local, stop);
  finish(c, store, stop, queue);
}

/// Without a launcher each rank ends on its own; only rank 0 knows the store.
RunSummary ended_alone(RunSummary summary, int rank) {
  summary.launcher_gone = launcher_gone() || workers_lost();
  if (rank != 0) {
    summary.stop_signal = stop_signal();
    summary.store_pending = 1;  // unknown here; the run did stop early
  }
  return summary;
}

/// Phase 6: every rank returns the same exit code: rank 0's counts to all. Workers that finished
/// early wait without spinning (a blocking MPI_Bcast busy-polls and would steal the core of a rank
/// still computing). If the launcher dies meanwhile, the others may never join: the buffer is
/// left to MPI (leaked), and false is returned.
bool share_outcome(RunSummary& summary, int rank, MPI_Comm comm) {
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
      return false;
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
  return true;
}

}  // namespace

void check_store(const plan::Plan& plan, const RunOptions& opt) {
  try {
    const store::WriterLock lock = claim(opt);
    const bool exists = check_claimed(opt, lock, plan);
    if (exists) store::refuse_open_elsewhere(lock.path(), opt.output.string());  // a resume could not open it
    if (exists && !opt.overwrite) {  // open_or_create resumes it, grown first when of another plan
      if (store::read_info(opt.output).plan_hash == plan.hash) {
        store::Store::open_read(opt.output, plan);  // open_resume's checks, read-only
        return;
      }
      check_growth(opt.output, plan);
      store::refuse_unwritable_replacement(lock.path(), opt.output.string());
    } else {
      if (exists) store::refuse_unwritable_replacement(lock.path(), opt.output.string());
      store::check_output(lock, opt.overwrite);  // Store::create's
    }
    // Creation and growth build the store under a temporary name beside it: the directory must take one.
    store::remove_temporary(lock.make_temporary());
  } catch (const std::exception& e) {
    throw StoreRefused(is_out_of_memory(e) ? out_of_memory_message("opening the store", e, 0.0) : e.what());
  }
}

int RunSummary::exit_code() const {
  if ((stop_signal != 0 || time_limited || launcher_gone) && store_pending > 0) return 4;
  return store_failed > 0 || (fail_on_diverged && store_diverged + store_vanished > 0) ? 3 : 0;
}

namespace {
// The default BundleRunner: models::run_bundle on the plan's job for the unit's tasks.
void run_planned_bundle(const plan::Plan& plan, const std::vector<std::uint64_t>& tasks,
                        const std::function<void(models::TaskOutput&&)>& on_done,
                        const std::function<bool()>& cancelled) {
  models::run_bundle(plan::bundle_job(plan, tasks), on_done, cancelled);
}
}  // namespace

RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm, const BundleRunner& runner_) {
  const BundleRunner runner = runner_ ? runner_ : BundleRunner(run_planned_bundle);
  parallel::set_threads(opt.threads);
  linalg::set_blas_threads(opt.blas_threads);
  install_stop_handlers();
  RunSummary summary;
  summary.total = plan.tasks.size();
  summary.fail_on_diverged = opt.fail_on_diverged;
  const auto t0 = steady::now();
  const RunContext c{
      plan, opt, comm, runner, mpi::comm_rank(comm), mpi::comm_size(comm), run_deadline(t0, opt.time_limit_s), summary};
  if (c.deadline) summary.time_limit_s = std::chrono::duration<double>(*c.deadline - t0).count();
  auto platforms = gather_platforms(comm);
  auto store = open_store_everywhere(c);
  if (c.rank == 0)
    note_new_kernels(
        opt.events, platforms,
        summary.resumed ? store->finished_by_platform() : std::vector<std::pair<store::Platform, std::uint64_t>>{});
  if (c.rank != 0)
    run_worker(runner, plan, opt, comm, c.rank, summary);
  else
    run_rank0(c, store, std::move(platforms));
  summary.wall_s = std::chrono::duration<double>(steady::now() - t0).count();
  // While the launcher tears the job down, rank 0 ends once the store is closed, without handing
  // out the exit code (a rank may be dead with its node; mpiexec exits 1 anyway). The workers wait
  // for it: when one rank exits, Open MPI kills the others at once, so a worker must not end
  // before rank 0.
  const bool alone = launcher_gone() || workers_lost() || (c.rank == 0 && launcher_teardown());
  if (alone || !share_outcome(summary, c.rank, comm)) summary = ended_alone(summary, c.rank);
  if (c.rank == 0) report(opt.events, event::Finished{opt.output.string(), summary});
  return summary;
}

}  // namespace rcsweep::sweep
