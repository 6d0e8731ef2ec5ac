// The task farm under mpiexec at 1, 2 and 3 ranks: every task done exactly once, and every stored
// number bitwise equal to the serial in-process computation (hence equal across rank counts).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"
#include "metrics/metrics.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"
#include "plan/plan.hpp"
#include "sweep/driver.hpp"
#include "sweep/mpi.hpp"
#include "../common/mpi_run.hpp"

namespace rcsweep {
namespace {

const char* sweep_text = R"(
[sweep]
name = "mpi-bitwise"
seed = 99
replicates = 3
[model]
depth = 5
input = "orthonormal"
[axes]
mixer = ["softmax", "markov"]
lambda = [0.0, 1.5]
norm = ["none", "layernorm"]
[[zip]]
T = [8, 12, 16]
d = [16, 12, 24]
[output]
spectra = "all"
)";

std::vector<double> read_all(hid_t file, const std::string& path) {
  const hid_t ds = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  const auto n = H5Sget_simple_extent_npoints(space);
  std::vector<double> out(static_cast<std::size_t>(n));
  H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(space);
  H5Dclose(ds);
  return out;
}

struct TaskRow {
  std::uint64_t id;
  std::int8_t status;
  std::int32_t rank;
};

std::vector<TaskRow> read_tasks(hid_t file) {
  const hid_t ds = H5Dopen2(file, "/tasks", H5P_DEFAULT);
  const hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(TaskRow));
  H5Tinsert(type, "id", HOFFSET(TaskRow, id), H5T_NATIVE_UINT64);
  H5Tinsert(type, "status", HOFFSET(TaskRow, status), H5T_NATIVE_INT8);
  H5Tinsert(type, "rank", HOFFSET(TaskRow, rank), H5T_NATIVE_INT32);
  const hid_t space = H5Dget_space(ds);
  std::vector<TaskRow> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data());
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(ds);
  return rows;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Run `plan` on every rank into a store; on rank 0, check every task done exactly once by a valid
/// rank and every stored number bitwise equal to the task computed alone (models::run_task), hence
/// to any other layout. Returns the run's summary.
sweep::RunSummary expect_bitwise_serial(const plan::Plan& plan, const std::string& stem) {
  const int rank = mpi::comm_rank(MPI_COMM_WORLD), size = mpi::comm_size(MPI_COMM_WORLD);
  const auto [path, summary] = test::run_into_temp_store(plan, stem);
  if (rank != 0) return summary;

  EXPECT_EQ(summary.done, plan.tasks.size());
  EXPECT_EQ(summary.exit_code(), 0);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  if (file < 0) return summary;
  const auto tasks = read_tasks(file);
  EXPECT_EQ(tasks.size(), plan.tasks.size());
  for (const auto& t : tasks) {
    EXPECT_EQ(t.status, 1) << "task " << t.id;  // done, exactly once (one row per task)
    EXPECT_GE(t.rank, 0);
    EXPECT_LT(t.rank, size);
  }

  const int L1 = plan.max_depth + 1;
  std::vector<std::vector<double>> stored;
  for (auto name : metrics::layer_metric_names) stored.push_back(read_all(file, "/layers/" + std::string(name)));
  const auto spectra = read_all(file, "/spectra/x_sv");
  std::size_t mismatches = 0;
  for (const auto& t : plan.tasks) {
    const auto ref = models::run_task(plan::bundle_job(plan, {t.id}));
    for (int l = 0; l < L1; ++l) {
      for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k) {
        const double got = stored[k][t.id * L1 + l], want = ref.layers[l][k];
        mismatches += !(same_bits(got, want) || (std::isnan(got) && std::isnan(want)));
      }
      const auto off = plan.spectrum_offset(t.id, l);
      if (off < 0) {  // not a stored layer ([output] spectra = "last")
        EXPECT_TRUE(ref.spectra[l].empty()) << "layer " << l;
        continue;
      }
      for (std::size_t i = 0; i < ref.spectra[l].size(); ++i)
        mismatches += !same_bits(spectra[off + i], ref.spectra[l][i]);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "at " << size << " ranks";
  H5Fclose(file);
  std::filesystem::remove(path);
  return summary;
}

TEST(SweepMpi, StoreIsBitwiseEqualToSerialComputation) {
  (void)expect_bitwise_serial(plan::make_plan(config::parse_sweep(sweep_text, "test")), "rcsweep_mpi");
}

// One bundle of many tasks (a scan of lambda, one replicate): on several ranks it is cut into
// slices (plan/schedule.hpp), at least one per rank, each rank drawing the shared weights itself;
// the results are bitwise those of the tasks computed alone. (Which rank computes which slice is
// left to timing: tests/e2e/test_slices.py checks that two ranks both compute a longer scan.)
TEST(SweepMpi, SlicesOfOneBundleAreBitwiseEqualToSerialComputation) {
  std::string lambdas;
  for (int i = 0; i < 24; ++i) lambdas += (i ? ", " : "") + std::to_string(-1.0 + 0.125 * i);
  const plan::Plan plan = plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "mpi-slices"
seed = 7
replicates = 1
[model]
depth = 6
T = 24
d = 32
mixer = "softmax"
norm = "layernorm"
[axes]
lambda = [)" + lambdas + R"(]
[output]
spectra = "last"
)",
                                                              "test"));
  ASSERT_EQ(plan.bundles.size(), 1u);
  const auto summary = expect_bitwise_serial(plan, "rcsweep_mpi_slices");
  if (mpi::comm_rank(MPI_COMM_WORLD) == 0) {
    EXPECT_GE(summary.units, static_cast<std::uint64_t>(mpi::comm_size(MPI_COMM_WORLD)));
  }
}

// A task that throws is recorded as failed with its message and the sweep goes on (exit 3): here
// every bundle throws, because the input file of input = "file" is never loaded (the CLI loads it).
TEST(SweepMpi, ThrowingTasksAreRecordedFailedAndTheSweepGoesOn) {
  const int rank = mpi::comm_rank(MPI_COMM_WORLD);
  const plan::Plan plan = plan::make_plan(config::parse_sweep(R"(
[sweep]
name = "mpi-failed"
seed = 1
replicates = 2
[model]
depth = 2
input = "file"
input_path = "never-loaded.h5"
input_dataset = "X"
[[zip]]
T = [4, 6, 8]
d = [8, 8, 8]
)",
                                                              "test"));
  const auto [path, summary] = test::run_into_temp_store(plan, "rcsweep_mpi_failed");
  EXPECT_EQ(summary.exit_code(), 3);
  EXPECT_EQ(summary.store_failed, plan.tasks.size());
  if (rank != 0) return;
  EXPECT_EQ(summary.failed, plan.tasks.size());
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& t : read_tasks(file)) EXPECT_EQ(t.status, 2) << "task " << t.id;
  const auto fro = read_all(file, "/layers/fro");
  for (double x : fro) EXPECT_TRUE(std::isnan(x));
  H5Fclose(file);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rcsweep
