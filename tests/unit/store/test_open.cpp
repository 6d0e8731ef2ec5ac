// Opening an existing store (src/store/open.cpp): a resume of the same plan sees the statuses and
// continues; another plan is refused naming both hashes and both runs' overrides; damaged and
// foreign files, and stores made before a dataset existed, give a StoreError (never a crash); a
// store made before a metric of the registry (not a core one) is read with NaN for it, and a resume
// adds its dataset.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "metrics/metric_names.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::fake_result;
using test::H5Id;
using test::make_spec;
using test::prov;
using test::store_error_of;
using test::StoreTest;

namespace {

/// Stores made by Store::create and then damaged, and files that are no store.
class DamagedStoreTest : public StoreTest {
 protected:
  void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out << bytes;
  }
  std::string real_store_bytes() {
    const auto plan = plan::make_plan(make_spec(config::Spectra::all));
    {
      Store s = Store::create(path("real.h5"), plan, prov(), false);
      std::vector<TaskResult> batch = {fake_result(plan, 0), fake_result(plan, 1)};
      s.write(batch);
    }
    std::ifstream in(path("real.h5"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  /// read_info and open_resume must both throw a StoreError containing `fragment`.
  void expect_refused(const fs::path& p, const std::string& fragment) {
    const std::string a = store_error_of([&] { store::read_info(p); });
    EXPECT_NE(a.find(fragment), std::string::npos) << p << ": " << a;
    const auto plan = plan::make_plan(make_spec(config::Spectra::all));
    const std::string b = store_error_of([&] { Store::open_resume(p, plan, prov()); });
    EXPECT_NE(b.find(fragment), std::string::npos) << p << ": " << b;
  }
};

}  // namespace

TEST_F(StoreTest, ResumeSamePlanSeesStatusesAndContinues) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  {
    Store s = Store::create(path("r.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 4), fake_result(plan, 7, TaskStatus::failed)};
    s.write(batch);
  }
  auto p2 = prov();
  p2.mpi_ranks = 5;
  p2.created = "2030-01-01T00:00:00Z";
  {
    Store s = Store::open_resume(path("r.h5"), plan, p2);
    const auto st = s.task_status();
    EXPECT_EQ(st[4], TaskStatus::done);
    EXPECT_EQ(st[7], TaskStatus::failed);
    EXPECT_EQ(std::count(st.begin(), st.end(), TaskStatus::pending), 14);
    std::vector<TaskResult> batch = {fake_result(plan, 7), fake_result(plan, 8)};
    s.write(batch);
  }
  const auto info = store::read_info(path("r.h5"));
  EXPECT_EQ(info.n_done, 3u);
  EXPECT_EQ(info.n_failed, 0u);
  EXPECT_EQ(info.mpi_ranks, 5);
  EXPECT_EQ(info.created, "2026-01-01T00:00:00Z");  // kept from the first run
}

TEST_F(StoreTest, OverridesAreRecordedAndARefusedResumeNamesBothRunsOverrides) {
  auto spec = make_spec(config::Spectra::last);
  spec.overrides = {"axes.lambda=[0, 0.5]", "sweep.replicates=2"};
  const auto plan = plan::make_plan(spec);
  { Store::create(path("o.h5"), plan, prov(), false); }
  EXPECT_EQ(store::read_info(path("o.h5")).overrides, spec.overrides);
  { Store::create(path("none.h5"), plan::make_plan(make_spec(config::Spectra::last, 0.75)), prov(), false); }
  EXPECT_TRUE(store::read_info(path("none.h5")).overrides.empty());

  const auto other = make_spec(config::Spectra::last, 0.75);
  const std::string msg = store_error_of([&] { Store::open_resume(path("o.h5"), plan::make_plan(other), prov()); });
  EXPECT_NE(msg.find("was made from a different sweep file or command-line overrides (plan hash "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("; the store's overrides: 'axes.lambda=[0, 0.5]' sweep.replicates=2, this run's: none); use a "
                     "new output file or --overwrite"),
            std::string::npos)
      << msg;
  const std::string msg2 = store_error_of([&] { Store::open_resume(path("none.h5"), plan, prov()); });
  EXPECT_NE(msg2.find("the store's overrides: none, this run's: 'axes.lambda=[0, 0.5]' sweep.replicates=2)"),
            std::string::npos)
      << msg2;
}

TEST_F(StoreTest, ResumeDifferentPlanNamesBothHashes) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  const auto other = plan::make_plan(make_spec(config::Spectra::last, /*lambda1=*/0.75));
  ASSERT_NE(plan.hash, other.hash);
  { Store::create(path("h.h5"), plan, prov(), false); }
  const std::string msg = store_error_of([&] { Store::open_resume(path("h.h5"), other, prov()); });
  EXPECT_NE(msg.find(plan.hash), std::string::npos) << msg;
  EXPECT_NE(msg.find(other.hash), std::string::npos) << msg;
  EXPECT_NE(msg.find("different sweep file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("store-test"), std::string::npos) << msg;
}

TEST_F(DamagedStoreTest, MissingFile) { expect_refused(path("nope.h5"), "no such file"); }

TEST_F(DamagedStoreTest, EmptyFile) {
  write_bytes(path("empty.h5"), "");
  expect_refused(path("empty.h5"), "not an HDF5 file");
}

TEST_F(DamagedStoreTest, TextFile) {
  write_bytes(path("text.h5"), "[sweep]\nname = \"oops, a sweep file\"\n");
  expect_refused(path("text.h5"), "not an HDF5 file");
}

TEST_F(DamagedStoreTest, RandomBytes) {
  std::mt19937 gen(123);
  std::string bytes(64 * 1024, '\0');
  for (auto& c : bytes) c = static_cast<char>(gen() & 0xff);
  write_bytes(path("random.h5"), bytes);
  expect_refused(path("random.h5"), "not an HDF5 file");
}

TEST_F(DamagedStoreTest, TruncatedHalf) {
  const std::string bytes = real_store_bytes();
  write_bytes(path("half.h5"), bytes.substr(0, bytes.size() / 2));
  expect_refused(path("half.h5"), "damaged");
}

TEST_F(DamagedStoreTest, TruncatedToOneKiB) {
  const std::string bytes = real_store_bytes();
  write_bytes(path("1k.h5"), bytes.substr(0, 1024));
  expect_refused(path("1k.h5"), "damaged");
}

TEST_F(DamagedStoreTest, HeaderOnlyGarbageAfterSignature) {
  // A valid signature followed by garbage: HDF5 finds the signature, then must fail cleanly.
  std::string bytes = real_store_bytes();
  std::mt19937 gen(5);
  for (std::size_t i = 48; i < bytes.size(); ++i) bytes[i] = static_cast<char>(gen() & 0xff);
  write_bytes(path("garbled.h5"), bytes);
  expect_refused(path("garbled.h5"), "damaged");
}

TEST_F(DamagedStoreTest, PlainHdf5WithoutRcsweepAttributes) {
  {
    H5Id f(H5Fcreate(path("plain.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hsize_t n = 3;
    H5Id sp(H5Screate_simple(1, &n, nullptr));
    H5Id d(H5Dcreate2(f.id, "data", H5T_NATIVE_DOUBLE, sp.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  }
  expect_refused(path("plain.h5"), "is not an rcsweep store");
}

TEST_F(DamagedStoreTest, AnotherSchemaVersion) {
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Adelete(f.id, "schema_version");
    H5Id sp(H5Screate(H5S_SCALAR));
    H5Id a(H5Acreate2(f.id, "schema_version", H5T_STD_I32LE, sp.id, H5P_DEFAULT, H5P_DEFAULT));
    const int v = store::schema_version + 1;
    H5Awrite(a.id, H5T_NATIVE_INT, &v);
  }
  expect_refused(path("real.h5"), "schema version " + std::to_string(store::schema_version + 1) +
                                      ", this rcsweep reads " + std::to_string(store::schema_version));
}

TEST_F(DamagedStoreTest, StoreWithoutTasksDataset) {
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Ldelete(f.id, "tasks", H5P_DEFAULT);
  }
  expect_refused(path("real.h5"), "damaged rcsweep store");
}

TEST_F(DamagedStoreTest, ResumeOfStoreWithoutTheoryIsRefused) {
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f.id, "theory", H5P_DEFAULT), 0);
  }
  const auto plan = plan::make_plan(make_spec(config::Spectra::all));
  const std::string msg = store_error_of([&] { Store::open_resume(path("real.h5"), plan, prov()); });
  EXPECT_NE(msg.find("made by an older rcsweep; rerun with --overwrite"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("damaged"), std::string::npos) << msg;
  EXPECT_EQ(store::read_info(path("real.h5")).n_done, 2u);  // still readable
}

TEST_F(DamagedStoreTest, ResumeOfStoreWithoutMixerSpectraIsRefused) {
  for (const char* name : {"spectra/m_sv", "spectra/m_offset"}) {
    real_store_bytes();
    {
      H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      ASSERT_GE(H5Ldelete(f.id, name, H5P_DEFAULT), 0);
    }
    const auto plan = plan::make_plan(make_spec(config::Spectra::all));
    const std::string msg = store_error_of([&] { Store::open_resume(path("real.h5"), plan, prov()); });
    EXPECT_NE(msg.find("has no /" + std::string(name) + ": made by an older rcsweep; rerun with --overwrite"),
              std::string::npos)
        << msg;
    EXPECT_EQ(store::read_info(path("real.h5")).n_done, 2u);  // still readable
    fs::remove(path("real.h5"));
  }
}

TEST_F(DamagedStoreTest, ResumeWithMixerSpectraOfWrongLengthIsRefused) {
  // Same plan, but /spectra/m_sv replaced by a dataset of another length.
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f.id, "spectra/m_eig_im", H5P_DEFAULT), 0);
    const hsize_t n = 7;
    H5Id space(H5Screate_simple(1, &n, nullptr));
    H5Id d(H5Dcreate2(f.id, "spectra/m_eig_im", H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(d.id, 0);
  }
  const auto plan = plan::make_plan(make_spec(config::Spectra::all));
  const std::string msg = store_error_of([&] { Store::open_resume(path("real.h5"), plan, prov()); });
  EXPECT_NE(msg.find("m_eig_im has the wrong length"), std::string::npos) << msg;
}

// ---- stores made before a metric of the registry (docs/SCHEMA.md "Adding a metric") ------------

namespace {

/// RCSWEEP_TEST_CORE_METRICS = n for the scope of a test: the store takes only the registry's first
/// n metrics as core, so that a store lacking a later one stands for a store made before it (every
/// metric of today is core).
class CoreMetrics {
 public:
  explicit CoreMetrics(const std::string& n) { ::setenv(name, n.c_str(), 1); }
  explicit CoreMetrics(std::size_t n) : CoreMetrics(std::to_string(n)) {}
  ~CoreMetrics() { ::unsetenv(name); }
  CoreMetrics(const CoreMetrics&) = delete;
  CoreMetrics& operator=(const CoreMetrics&) = delete;

 private:
  static constexpr const char* name = "RCSWEEP_TEST_CORE_METRICS";
};

constexpr std::size_t last_metric = metrics::n_layer_metrics - 1;
constexpr std::size_t last_core = metrics::n_core_metrics - 1;

std::string layers_path(std::size_t k) { return "/layers/" + std::string(metrics::layer_metric_names[k]); }

/// Remove /layers/<metric k> of the store at `p` (HDF5 C API, as an older rcsweep's store).
void delete_metric(const fs::path& p, std::size_t k) {
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  ASSERT_GE(H5Ldelete(f.id, layers_path(k).c_str(), H5P_DEFAULT), 0);
}

bool has_dataset(const std::vector<std::string>& datasets, std::size_t k) {
  return std::find(datasets.begin(), datasets.end(), layers_path(k)) != datasets.end();
}

}  // namespace

TEST_F(DamagedStoreTest, AStoreWithoutALaterMetricIsReadAsNaNAndAResumeAddsIt) {
  real_store_bytes();  // tasks 0 and 1 done
  delete_metric(path("real.h5"), last_metric);
  const auto plan = plan::make_plan(make_spec(config::Spectra::all));
  const CoreMetrics core(last_metric);  // the last metric is a later one

  const auto info = store::read_info(path("real.h5"));
  EXPECT_EQ(info.n_done, 2u);
  EXPECT_FALSE(has_dataset(info.datasets, last_metric));
  {  // read (merge, --reuse, growth): NaN for the metric the store lacks, the others as written
    const std::vector<std::uint64_t> ids = {0, 1};
    const auto results = Store::open_read(path("real.h5"), plan).read_results(ids);
    for (std::uint64_t t : ids) {
      const TaskResult want = fake_result(plan, t);
      ASSERT_EQ(results[t].layers.size(), want.layers.size());
      for (std::size_t l = 0; l < want.layers.size(); ++l)
        for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k) {
          if (k == last_metric)
            EXPECT_TRUE(std::isnan(results[t].layers[l][k])) << t << " " << l;
          else
            EXPECT_EQ(results[t].layers[l][k], want.layers[l][k]) << t << " " << l << " " << k;
        }
    }
  }
  {  // a resume creates it: NaN for the tasks finished before, the values of the tasks run now
    Store s = Store::open_resume(path("real.h5"), plan, prov());
    std::vector<TaskResult> batch = {fake_result(plan, 2)};
    s.write(batch);
  }
  EXPECT_TRUE(has_dataset(store::read_info(path("real.h5")).datasets, last_metric));
  H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  EXPECT_EQ(test::dims_of(f.id, layers_path(last_metric).c_str()), (std::vector<hsize_t>{16, 4}));
  const auto added = test::read_dataset<double>(f.id, layers_path(last_metric).c_str(), H5T_NATIVE_DOUBLE);
  const auto kept = test::read_dataset<double>(f.id, layers_path(0).c_str(), H5T_NATIVE_DOUBLE);
  const TaskResult t0 = fake_result(plan, 0), t2 = fake_result(plan, 2);
  for (std::size_t l = 0; l < 4; ++l) {
    EXPECT_TRUE(std::isnan(added[0 * 4 + l]) && std::isnan(added[1 * 4 + l])) << l;
    EXPECT_EQ(added[2 * 4 + l], t2.layers[l][last_metric]) << l;
    EXPECT_TRUE(std::isnan(added[3 * 4 + l])) << l;  // pending
    EXPECT_EQ(kept[0 * 4 + l], t0.layers[l][0]) << l;
  }
  H5Id d(H5Dopen2(f.id, layers_path(last_metric).c_str(), H5P_DEFAULT));
  EXPECT_EQ(test::read_str_attr(d.id, "description"), metrics::layer_metrics[last_metric].description);
  EXPECT_EQ(test::read_str_attr(d.id, "units"), metrics::layer_metrics[last_metric].units);
  H5Id g(H5Gopen2(f.id, "/layers", H5P_DEFAULT));
  EXPECT_EQ(test::read_str_attr(g.id, "computed"), metrics::names_of(metrics::default_metrics()));
}

TEST_F(DamagedStoreTest, AStoreWithoutACoreMetricIsDamaged) {
  for (const std::size_t k : {std::size_t{0}, last_core}) {
    real_store_bytes();
    delete_metric(path("real.h5"), k);
    expect_refused(path("real.h5"), "real.h5: damaged rcsweep store (" + layers_path(k) + " is missing)");
    fs::remove(path("real.h5"));
  }
  // Fewer core metrics for a test: the ones before the last stay required.
  real_store_bytes();
  delete_metric(path("real.h5"), last_core - 1);
  const CoreMetrics core(last_core);
  expect_refused(path("real.h5"), "damaged rcsweep store (" + layers_path(last_core - 1) + " is missing)");
}

TEST_F(DamagedStoreTest, TheTestCountOfCoreMetricsCanOnlyLowerIt) {
  real_store_bytes();
  delete_metric(path("real.h5"), last_core);
  for (const std::string& n :
       std::vector<std::string>{"0", "-1", "+1", " 1", "12x", "", std::to_string(metrics::n_core_metrics + 1)}) {
    const CoreMetrics core(n);
    expect_refused(path("real.h5"), "damaged rcsweep store (" + layers_path(last_core) + " is missing)");
  }
}

TEST_F(DamagedStoreTest, ALaterMetricTheStoreHasIsChecked) {
  real_store_bytes();
  {  // the last metric's dataset of another shape
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f.id, layers_path(last_metric).c_str(), H5P_DEFAULT), 0);
    const hsize_t n = 7;
    H5Id space(H5Screate_simple(1, &n, nullptr));
    H5Id d(H5Dcreate2(f.id, layers_path(last_metric).c_str(), H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT));
    ASSERT_GE(d.id, 0);
  }
  const CoreMetrics core(last_metric);
  expect_refused(path("real.h5"), "damaged rcsweep store (" + layers_path(last_metric) + " is 7 but must be 16 x 4)");
}
