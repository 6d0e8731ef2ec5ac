// The scheduler at 64 ranks (oversubscribed on a small machine): a real plan and a real store,
// but every task sleeps a known time instead of computing (tests/mpi/synthetic_tasks.hpp), so the
// ranks need no CPU and the makespan of an ideal farm is known. Checks (docs/SCALING.md):
//   - every task is written once, with the values its rank produced;
//   - makespan <= 1.05 * max(total work / ranks, largest unit handed out: a bundle or a slice of
//     one, plan/schedule.hpp) + start-up cost (work as the sleeps actually took it, from the
//     store's wall_s: a loaded machine wakes sleepers late), the start-up cost being the wall
//     time of a small plan of zero-cost tasks (store creation, hand-out, writes, final flush and
//     sync: measured 0.04-0.24 s), capped at 1 s;
//   - the writer is never the bottleneck: rank 0 spends under 10% of the run writing, every
//     result is written within write_interval + 0.25 s of its arrival, and the workers' mean wait
//     for their next bundle stays under 50 ms;
//   - with 1 ms tasks, rank 0's service thread hands out at least 500 bundles/s.
// Registered at 64 ranks only, label `scaling` (tests/mpi/CMakeLists.txt); about 30 s.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "../common/mpi_run.hpp"
#include "config/sweep_spec.hpp"
#include "plan/plan.hpp"
#include "sweep/driver.hpp"
#include "sweep/mpi.hpp"
#include "synthetic_tasks.hpp"

namespace rcsweep {
namespace {

// Mixed sizes like a real sweep: mostly small (T, d), a few large ones; two tasks (lambda values)
// per bundle. Replicates set the amount of work.
std::string sweep_text(int replicates) {
  return R"(
[sweep]
name = "scheduler-scaling"
seed = 5
replicates = )" +
         std::to_string(replicates) +
         R"(
[model]
depth = 4
mixer = "softmax"
[axes]
lambda = [0.0, 1.0]
[[zip]]
T = [32, 32, 64, 64, 64, 128, 128, 256, 512]
d = [32, 64, 64, 128, 256, 128, 256, 256, 512]
[output]
spectra = "last"
)";
}

/// Task durations from the plan's own cost model, spread geometrically over [lo, hi] seconds by
/// log(flops): the largest-first order of the scheduler is the true order (a correct cost model).
/// Tasks of equal cost (a scan of lambda) all take hi.
std::vector<double> durations(const plan::Plan& plan, double lo, double hi) {
  double fmin = plan.tasks[0].flops, fmax = fmin;
  for (const auto& t : plan.tasks) fmin = std::min(fmin, t.flops), fmax = std::max(fmax, t.flops);
  std::vector<double> s;
  for (const auto& t : plan.tasks)
    s.push_back(fmax > fmin ? lo * std::pow(hi / lo, std::log(t.flops / fmin) / std::log(fmax / fmin)) : hi);
  return s;
}

/// The units the driver hands out at `ranks` ranks: the plan's bundles priced by the cost model at
/// the rates run_sweep uses without a calibration, cut by plan::make_schedule.
plan::Schedule schedule(const plan::Plan& plan, int ranks) {
  std::vector<plan::BundleWork> work;
  for (const auto& b : plan.bundles) work.push_back(plan::bundle_work(plan, b.tasks, plan::default_calibration()));
  return plan::make_schedule(work, ranks);
}

struct Bound {
  double work = 0.0, largest = 0.0, per_rank = 0.0, makespan = 0.0;  ///< makespan: the lower bound
};

/// max(total work / ranks, largest unit) for the units of `s` taking `seconds` per task (the
/// sleeping runner has no shared work: a slice costs only its tasks).
Bound lower_bound(const plan::Schedule& s, const std::vector<double>& seconds, int ranks) {
  Bound b;
  for (const auto& unit : s.units) {
    double t = 0.0;
    for (const auto id : unit.tasks) t += seconds[id];
    b.work += t;
    b.largest = std::max(b.largest, t);
  }
  b.per_rank = b.work / ranks;
  b.makespan = std::max(b.per_rank, b.largest);
  return b;
}

/// Per-rank counters of a run gathered on rank 0.
struct Gathered {
  std::vector<double> bundles, wait_s, max_wait_s;
};

Gathered gather(const sweep::RunSummary& s) {
  const int size = mpi::comm_size(MPI_COMM_WORLD);
  double mine[3] = {static_cast<double>(s.bundles), s.wait_s, s.max_wait_s};
  std::vector<double> all(3 * static_cast<std::size_t>(size));
  MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  Gathered g;
  for (int r = 0; r < size; ++r) {
    g.bundles.push_back(all[3 * r]);
    g.wait_s.push_back(all[3 * r + 1]);
    g.max_wait_s.push_back(all[3 * r + 2]);
  }
  return g;
}

struct Run {
  std::string path;
  sweep::RunSummary summary;
  Gathered ranks;
};

Run run_synthetic(const plan::Plan& plan, const std::vector<double>& seconds, const std::string& stem) {
  Run r;
  if (mpi::comm_rank(MPI_COMM_WORLD) == 0)
    r.path = (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(getpid()) + ".h5")).string();
  r.path = mpi::bcast(r.path, 0, MPI_COMM_WORLD);
  sweep::RunOptions opt;
  opt.output = r.path;
  opt.overwrite = true;
  MPI_Barrier(MPI_COMM_WORLD);
  r.summary = sweep::run_sweep(plan, opt, MPI_COMM_WORLD,
                               test::sleeping_runner([&](std::uint64_t t) { return seconds[t]; }));
  r.ranks = gather(r.summary);
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

std::vector<double> read_all(hid_t file, const std::string& path) {
  const hid_t ds = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  std::vector<double> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(space);
  H5Dclose(ds);
  return out;
}

/// Every task done once, by a valid rank, with the synthetic values of its task id. Returns each
/// task's stored wall_s (the time its sleep actually took).
std::vector<double> expect_store_complete(const plan::Plan& plan, const std::string& path, int size) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  if (file < 0) return {};
  struct Row {
    std::uint64_t id;
    std::int8_t status;
    double wall_s;
    std::int32_t rank;
  };
  const hid_t ds = H5Dopen2(file, "/tasks", H5P_DEFAULT);
  const hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(Row));
  H5Tinsert(type, "id", HOFFSET(Row, id), H5T_NATIVE_UINT64);
  H5Tinsert(type, "status", HOFFSET(Row, status), H5T_NATIVE_INT8);
  H5Tinsert(type, "wall_s", HOFFSET(Row, wall_s), H5T_NATIVE_DOUBLE);
  H5Tinsert(type, "rank", HOFFSET(Row, rank), H5T_NATIVE_INT32);
  std::vector<Row> rows(plan.tasks.size());
  H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
  H5Tclose(type);
  H5Dclose(ds);
  std::size_t bad = 0;
  for (const auto& r : rows) bad += r.status != 1 || r.rank < 0 || r.rank >= size;
  EXPECT_EQ(bad, 0u) << "tasks not done exactly once by a valid rank";
  const int L1 = plan.max_depth + 1;
  const auto fro = read_all(file, "/layers/fro");
  const auto spectra = read_all(file, "/spectra/x_sv");
  std::size_t mismatches = 0;
  for (const auto& t : plan.tasks)
    for (int l = 0; l < L1; ++l) {
      const auto k = static_cast<std::size_t>(
          std::find(metrics::layer_metric_names.begin(), metrics::layer_metric_names.end(), "fro") -
          metrics::layer_metric_names.begin());
      mismatches += fro[t.id * L1 + l] != test::synthetic_value(t.id, l, k);
      if (const auto off = plan.spectrum_offset(t.id, l); off >= 0)
        for (std::size_t i = 0; i < plan.spectrum_length(t.id); ++i)
          mismatches += spectra[off + i] != test::synthetic_value(t.id, l, i);
    }
  EXPECT_EQ(mismatches, 0u);
  H5Fclose(file);
  std::vector<double> wall;
  for (const auto& r : rows) wall.push_back(r.wall_s);
  return wall;
}

void report(const char* name, const Bound& planned, const Bound& b, const Run& r, std::size_t bundles) {
  const auto& s = r.summary;
  const auto& g = r.ranks;
  const double waits = std::accumulate(g.wait_s.begin() + 1, g.wait_s.end(), 0.0);
  const double handed = std::accumulate(g.bundles.begin() + 1, g.bundles.end(), 0.0);
  std::printf(
      "[scaling] %s: %zu bundles as %llu units, planned bound %.2f s; as slept: work %.1f s, work/ranks %.2f s, largest unit "
      "%.2f s -> bound %.2f s; makespan %.2f s (%.1f%% over); writer: %llu batches (max %llu results), %.3f s writing (%.1f%% of the run), "
      "max latency %.3f s; workers: mean wait per hand-out %.1f ms, max %.1f ms; units on rank 0: %.0f, "
      "per worker %.0f..%.0f\n",
      name, bundles, static_cast<unsigned long long>(s.units), planned.makespan, b.work, b.per_rank, b.largest,
      b.makespan, s.wall_s, 100.0 * (s.wall_s / b.makespan - 1.0), static_cast<unsigned long long>(s.write_batches),
      static_cast<unsigned long long>(s.max_batch), s.write_s, 100.0 * s.write_s / s.wall_s, s.max_write_latency_s,
      1e3 * waits / handed, 1e3 * *std::max_element(g.max_wait_s.begin() + 1, g.max_wait_s.end()), g.bundles[0],
      *std::min_element(g.bundles.begin() + 1, g.bundles.end()),
      *std::max_element(g.bundles.begin() + 1, g.bundles.end()));
  std::fflush(stdout);
}

// Start-up and hand-out cost: the same plan with zero-cost tasks (store creation, every bundle
// handed out and every result written, the final flush). Measured once, used by the tests below.
double startup_cost() {
  static double cost = -1.0;
  if (cost >= 0.0) return cost;
  const plan::Plan plan = plan::make_plan(config::parse_sweep(sweep_text(8), "test"));
  const std::vector<double> zero(plan.tasks.size(), 0.0);
  const auto r = run_synthetic(plan, zero, "rcsweep_sched_empty");
  if (mpi::comm_rank(MPI_COMM_WORLD) == 0) {
    std::printf("[scaling] zero-cost run: %zu bundles in %.3f s (store creation, hand-out, writes, final sync)\n",
                plan.bundles.size(), r.summary.wall_s);
    std::filesystem::remove(r.path);
  }
  cost = r.summary.wall_s;
  MPI_Bcast(&cost, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return cost;
}

constexpr double max_startup_s = 1.0;  // measured: docs/BENCHMARKS.md "The scheduler at 64 ranks"

// Task seconds in [lo, hi]. The bound is computed from the durations the sleeps actually took (on
// a loaded machine a sleeping rank may wake late: that lengthens the work, not the schedule).
void check_run(const char* name, const std::string& text, double lo, double hi, bool every_rank_busy) {
  const int rank = mpi::comm_rank(MPI_COMM_WORLD), size = mpi::comm_size(MPI_COMM_WORLD);
  const double startup = startup_cost();
  const plan::Plan plan = plan::make_plan(config::parse_sweep(text, "test"));
  const auto seconds = durations(plan, lo, hi);
  const plan::Schedule units = schedule(plan, size);
  const Bound planned = lower_bound(units, seconds, size);
  const auto r = run_synthetic(plan, seconds, "rcsweep_sched");
  if (rank != 0) return;
  const auto& s = r.summary;
  EXPECT_EQ(s.done, plan.tasks.size());
  EXPECT_EQ(s.exit_code(), 0);
  const auto slept = expect_store_complete(plan, r.path, size);
  std::filesystem::remove(r.path);
  ASSERT_EQ(slept.size(), plan.tasks.size());
  const Bound b = lower_bound(units, slept, size);
  report(name, planned, b, r, plan.bundles.size());

  // The whole plan was handed out, in the units of the schedule; with many units per rank every
  // rank computed (rank 0 too, in its main thread).
  EXPECT_EQ(s.units, units.units.size());
  EXPECT_EQ(std::accumulate(r.ranks.bundles.begin(), r.ranks.bundles.end(), 0.0), static_cast<double>(s.units));
  if (every_rank_busy) {
    EXPECT_GE(*std::min_element(r.ranks.bundles.begin(), r.ranks.bundles.end()), 1.0);
  }

  EXPECT_LE(startup, max_startup_s) << "start-up (zero-cost run) took " << startup << " s";
  EXPECT_GE(s.wall_s, planned.makespan) << "faster than the lower bound: the sleeps did not happen";
  EXPECT_LE(s.wall_s, 1.05 * b.makespan + std::min(startup, max_startup_s))
      << name << ": makespan " << s.wall_s << " s, bound " << b.makespan << " s, start-up " << startup << " s";

  // The writer is never the bottleneck.
  EXPECT_LE(s.write_s, 0.10 * s.wall_s) << "rank 0 spent " << s.write_s << " s of " << s.wall_s << " s writing";
  EXPECT_LE(s.max_write_latency_s, sweep::RunOptions{}.write_interval_s + 0.25);
  // Hand-out latency: a worker's wait between sending a bundle's results and receiving its next
  // bundle (or the stop). Measured 4-15 ms per hand-out with 64 ranks on 2 loaded cores; a writer
  // that held up the service thread would show here.
  const double waits = std::accumulate(r.ranks.wait_s.begin() + 1, r.ranks.wait_s.end(), 0.0);
  const double handouts = std::accumulate(r.ranks.bundles.begin() + 1, r.ranks.bundles.end(), 0.0);
  EXPECT_LE(waits / handouts, 0.05) << "workers waited " << waits / handouts << " s per hand-out on average";
}

// Many more bundles than ranks: the bound is total work / ranks (about 12 s per rank).
TEST(SchedulerScaling, WorkBoundMakespanAt64Ranks) { check_run("work-bound", sweep_text(120), 0.1, 1.0, true); }

// A few bundles as long as all the rest per rank: they are cut in two (two tasks each), and the
// bound is the largest task, which only a largest-first hand-out meets.
TEST(SchedulerScaling, LargestTaskBoundMakespanAt64Ranks) {
  check_run("largest-bound", sweep_text(8), 0.05, 3.0, false);
}

// A scan of lambda: 2 bundles of 320 tasks of 0.3 s for 64 ranks. Whole bundles would take 96 s;
// cut into slices (each repeating its bundle's shared work, which the sleeping runner leaves out)
// every rank gets 10 tasks: the bound is total work / ranks, 3 s.
TEST(SchedulerScaling, LambdaScanMakespanAt64Ranks) {
  std::string lambdas;
  for (int i = 0; i < 320; ++i) lambdas += (i ? ", " : "") + std::to_string(0.01 * i);
  const std::string text = R"(
[sweep]
name = "scheduler-scaling-scan"
seed = 6
replicates = 2
[model]
depth = 4
mixer = "softmax"
T = 128
d = 128
[axes]
lambda = [)" + lambdas + R"(]
[output]
spectra = "last"
)";
  const plan::Plan plan = plan::make_plan(config::parse_sweep(text, "test"));
  ASSERT_EQ(plan.bundles.size(), 2u);
  const auto units = schedule(plan, mpi::comm_size(MPI_COMM_WORLD));
  EXPECT_GE(units.units.size(), static_cast<std::size_t>(mpi::comm_size(MPI_COMM_WORLD)));
  check_run("lambda-scan", text, 0.3, 0.3, true);
}

// Tasks of 1 ms: the farm is bound by rank 0's service thread (receive, unpack, hand out, write).
// Its rate of bundles handed to workers bounds the bundles per second any number of ranks can
// finish (docs/SCALING.md); also run with --gtest_filter='*HandOut*' at other rank counts.
TEST(SchedulerScaling, HandOutRateOfTinyTasks) {
  const int rank = mpi::comm_rank(MPI_COMM_WORLD), size = mpi::comm_size(MPI_COMM_WORLD);
  const plan::Plan plan = plan::make_plan(config::parse_sweep(sweep_text(480), "test"));
  const std::vector<double> tiny(plan.tasks.size(), 0.001);
  const auto r = run_synthetic(plan, tiny, "rcsweep_sched_rate");
  if (rank != 0) return;
  const auto& s = r.summary;
  const double to_workers = static_cast<double>(s.units) - r.ranks.bundles[0];
  const double rate = to_workers / s.wall_s;
  std::printf("[scaling] hand-out rate at %d ranks: %zu bundles (%zu results) in %.3f s, %.0f of them to workers = "
              "%.0f bundles/s (%.0f results/s); writer %.3f s in %llu batches (max %llu results)\n",
              size, plan.bundles.size(), plan.tasks.size(), s.wall_s, to_workers, rate, 2 * rate, s.write_s,
              static_cast<unsigned long long>(s.write_batches), static_cast<unsigned long long>(s.max_batch));
  EXPECT_EQ(s.done, plan.tasks.size());
  (void)expect_store_complete(plan, r.path, size);
  std::filesystem::remove(r.path);
  // With few ranks the workers (not rank 0) bound the rate: 1 worker does at most ~500 bundles/s.
  if (size >= 16) {
    EXPECT_GE(rate, 500.0) << "rank 0 handed out only " << rate << " bundles/s";
  }
}

}  // namespace
}  // namespace rcsweep
