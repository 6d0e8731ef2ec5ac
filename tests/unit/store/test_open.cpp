// Opening an existing store (src/store/open.cpp): a resume of the same plan sees the statuses and
// continues; another plan is refused naming both hashes and both runs' overrides; damaged and
// foreign files, and stores made before a dataset existed, give a StoreError (never a crash).
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
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
