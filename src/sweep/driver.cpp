#include "sweep/driver.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "base/error.hpp"
#include "linalg/linalg.hpp"
#include "models/task_runner.hpp"
#include "rcsweep/version.hpp"
#include "store/store.hpp"
#include "sweep/message.hpp"
#include "sweep/mpi.hpp"
#include "sweep/progress.hpp"

namespace rcsweep::sweep {
namespace {

constexpr int tag_result = 11;  // worker -> 0: packed results of its last bundle (empty at first): "more work"
constexpr int tag_assign = 12;  // 0 -> worker: task ids of the next bundle; empty: stop

using TaskList = std::vector<std::uint64_t>;

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

store::TaskResult to_result(models::TaskOutput&& out, int rank) {
  store::TaskResult r;
  r.task = out.task;
  r.status = out.outcome == models::Outcome::done ? store::TaskStatus::done : store::TaskStatus::diverged;
  r.wall_s = out.seconds;
  r.rank = rank;
  r.message = std::move(out.message);
  r.layers = std::move(out.layers);
  r.spectra = std::move(out.spectra);
  r.mixer_sv = std::move(out.mixer_sv);
  r.mixer_eig_re = std::move(out.mixer_eig_re);
  r.mixer_eig_im = std::move(out.mixer_eig_im);
  r.theory = out.theory;
  r.grad_log10 = std::move(out.grad_log10);
  r.grad_stderr = std::move(out.grad_stderr);
  return r;
}

/// Compute one bundle; an exception marks all its tasks failed (the sweep goes on).
std::vector<store::TaskResult> compute(const plan::Plan& plan, const TaskList& tasks, int rank) {
  std::vector<store::TaskResult> results;
  try {
    models::run_bundle(plan, tasks, [&](models::TaskOutput&& out) { results.push_back(to_result(std::move(out), rank)); });
  } catch (const std::exception& e) {
    results.clear();
    for (const auto id : tasks) {
      store::TaskResult r;
      r.task = id;
      r.status = store::TaskStatus::failed;
      r.rank = rank;
      r.message = std::string("failed: ") + e.what();
      results.push_back(std::move(r));
    }
  }
  return results;
}

/// Work shared by rank 0's compute thread and its service thread.
class WorkQueue {
 public:
  explicit WorkQueue(std::deque<TaskList> items) : items_(std::move(items)) {}
  std::optional<TaskList> pop() {
    std::lock_guard lock(mutex_);
    if (items_.empty() || stop_) return std::nullopt;
    TaskList t = std::move(items_.front());
    items_.pop_front();
    return t;
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }

 private:
  std::mutex mutex_;
  std::deque<TaskList> items_;
  bool stop_ = false;
};

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

/// Rank 0's service thread: hands out bundles to workers, collects results, writes the store.
class Service {
 public:
  Service(const plan::Plan& plan, store::Store& store, WorkQueue& work, ResultQueue& local, MPI_Comm comm,
          const RunOptions& opt, double pending_flops, std::uint64_t pending_tasks, RunSummary& summary)
      : plan_(plan),
        store_(store),
        work_(work),
        local_(local),
        comm_(comm),
        opt_(opt),
        n_workers_(mpi::comm_size(comm) - 1),
        progress_(pending_flops, pending_tasks, opt.progress),
        summary_(summary) {}

  void run(const std::atomic<bool>& local_finished) {
    auto last_write = std::chrono::steady_clock::now(), last_sync = last_write;
    std::vector<store::TaskResult> batch;
    for (;;) {
      bool busy = serve_one_worker(batch);
      const bool local_done = local_finished.load();
      auto mine = local_.take();
      busy = busy || !mine.empty();
      for (auto& r : mine) batch.push_back(std::move(r));
      const bool finished = local_done && stopped_ == n_workers_;
      const auto now = std::chrono::steady_clock::now();
      if (!batch.empty() && (finished || std::chrono::duration<double>(now - last_write).count() >= opt_.write_interval_s)) {
        write(batch);
        last_write = now;
      }
      // H5Fflush hands the data to the OS; an fsync now and then also survives a node crash.
      if (std::chrono::duration<double>(now - last_sync).count() >= opt_.sync_interval_s) {
        store_.sync();
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
    for (auto& r : unpack(buf)) batch.push_back(std::move(r));
    const TaskList next = work_.pop().value_or(TaskList{});
    if (next.empty()) ++stopped_;
    mpi::check(MPI_Send(next.data(), static_cast<int>(next.size()), MPI_UINT64_T, status.MPI_SOURCE, tag_assign, comm_),
               "MPI_Send");
    return true;
  }

  void write(std::vector<store::TaskResult>& batch) {
    store_.write(batch);
    for (const auto& r : batch) {
      progress_.add(plan_.tasks[r.task].flops);
      switch (r.status) {
        case store::TaskStatus::done: ++summary_.done; break;
        case store::TaskStatus::failed: ++summary_.failed; break;
        case store::TaskStatus::diverged: ++summary_.diverged; break;
        case store::TaskStatus::pending: break;
      }
      if (r.status != store::TaskStatus::done && opt_.progress)
        std::fprintf(stderr, "[rcsweep] task %llu %s\n", static_cast<unsigned long long>(r.task), r.message.c_str());
    }
    batch.clear();
  }

  const plan::Plan& plan_;
  store::Store& store_;
  WorkQueue& work_;
  ResultQueue& local_;
  MPI_Comm comm_;
  const RunOptions& opt_;
  int n_workers_;
  int stopped_ = 0;
  Progress progress_;
  RunSummary& summary_;
};

void run_worker(const plan::Plan& plan, MPI_Comm comm, int rank) {
  std::vector<char> results;  // empty on the first request
  for (;;) {
    mpi::check(MPI_Send(results.data(), static_cast<int>(results.size()), MPI_BYTE, 0, tag_result, comm), "MPI_Send");
    MPI_Status status;
    mpi::check(MPI_Probe(0, tag_assign, comm, &status), "MPI_Probe");
    int count = 0;
    mpi::check(MPI_Get_count(&status, MPI_UINT64_T, &count), "MPI_Get_count");
    TaskList tasks(static_cast<std::size_t>(count));
    mpi::check(MPI_Recv(tasks.data(), count, MPI_UINT64_T, 0, tag_assign, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    if (tasks.empty()) return;
    results.clear();
    for (const auto& r : compute(plan, tasks, rank)) pack(r, results);
  }
}

}  // namespace

int RunSummary::exit_code() const { return (store_failed + store_diverged) > 0 ? 3 : 0; }

RunSummary run_sweep(const plan::Plan& plan, const RunOptions& opt, MPI_Comm comm) {
  const int rank = mpi::comm_rank(comm), size = mpi::comm_size(comm);
  linalg::set_blas_threads(opt.blas_threads);
  RunSummary summary;
  summary.total = plan.tasks.size();
  const auto t0 = std::chrono::steady_clock::now();

  // Phase 1 (rank 0): open or create the store; every rank learns whether that worked.
  std::optional<store::Store> store;
  std::string error;
  if (rank == 0) {
    try {
      store::Provenance prov{version, git_commit, utc_now(), hostname(), linalg::blas_info(), "", size,
                             opt.blas_threads};
      const bool exists = std::filesystem::exists(opt.output);
      if (opt.require_existing && !exists)
        throw StoreError(opt.output.string() + " does not exist: nothing to resume (drop --resume to start it)");
      if (exists && !opt.overwrite) {
        store.emplace(store::Store::open_resume(opt.output, plan, prov));
        summary.resumed = true;
      } else {
        store.emplace(store::Store::create(opt.output, plan, prov, opt.overwrite));
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  error = mpi::bcast(error, 0, comm);
  if (!error.empty()) throw StoreRefused(error);

  if (rank != 0) {
    run_worker(plan, comm, rank);
  } else {
    // Phase 2 (rank 0): the pending work, largest bundle first.
    const auto status = store->task_status();
    std::deque<TaskList> work;
    double pending_flops = 0.0;
    std::uint64_t pending_tasks = 0;
    for (const auto& b : plan.bundles) {
      TaskList pending;
      for (const auto id : b.tasks)
        if (status[id] == store::TaskStatus::pending) {
          pending.push_back(id);
          pending_flops += plan.tasks[id].flops;
        }
      pending_tasks += pending.size();
      if (!pending.empty()) work.push_back(std::move(pending));
    }
    std::uint64_t in_shard = 0;
    for (const auto& b : plan.bundles) in_shard += b.tasks.size();
    summary.skipped = in_shard - pending_tasks;
    if (opt.progress)
      std::fprintf(stderr, "[rcsweep] %s %s: %llu tasks in %zu bundles to run on %d rank%s (%llu already finished)\n",
                   summary.resumed ? "resuming" : "writing", opt.output.c_str(),
                   static_cast<unsigned long long>(pending_tasks), work.size(), size, size == 1 ? "" : "s",
                   static_cast<unsigned long long>(summary.skipped));

    // Phase 3: compute here while the service thread feeds the workers and writes results.
    WorkQueue queue(std::move(work));
    ResultQueue local;
    std::atomic<bool> local_finished{false};
    std::exception_ptr service_error;
    Service service(plan, *store, queue, local, comm, opt, pending_flops, pending_tasks, summary);
    std::thread service_thread([&] {
      try {
        service.run(local_finished);
      } catch (...) {
        service_error = std::current_exception();
        queue.stop();
      }
    });
    while (auto tasks = queue.pop()) local.push(compute(plan, *tasks, 0));
    local_finished = true;
    service_thread.join();
    if (service_error) std::rethrow_exception(service_error);

    // Phase 4: final state of the whole store.
    for (const auto s : store->task_status()) {
      summary.store_failed += s == store::TaskStatus::failed;
      summary.store_diverged += s == store::TaskStatus::diverged;
    }
    store->mark_finished(utc_now());
    store->sync();
  }
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Every rank returns the same exit code. Workers that finished early wait without spinning
  // (a blocking MPI_Bcast busy-polls and would steal the core of a rank still computing).
  std::uint64_t counts[2] = {summary.store_failed, summary.store_diverged};
  MPI_Request request;
  mpi::check(MPI_Ibcast(counts, 2, MPI_UINT64_T, 0, comm, &request), "MPI_Ibcast");
  for (int done = 0;;) {
    mpi::check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  summary.store_failed = counts[0];
  summary.store_diverged = counts[1];
  return summary;
}

}  // namespace rcsweep::sweep
