// A new store (src/store/schema.cpp): Store::create lays out every dataset with its final shape,
// attributes and fill values (read back with the plain HDF5 C API), refuses an existing file
// without overwrite, and Store::build keeps a store under a temporary name until publish().
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "metrics/metrics.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "store/writer_lock.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::dims_of;
using test::fake_result;
using test::H5Id;
using test::make_spec;
using test::mixer_spec;
using test::prov;
using test::read_dataset;
using test::read_field;
using test::read_int_attr;
using test::read_str_attr;
using test::store_error_of;
using test::StoreTest;

TEST_F(StoreTest, CreateHasShapesAttributesAndAllPending) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  const std::uint64_t n_tasks = plan.tasks.size();
  ASSERT_EQ(n_tasks, 16u);
  {
    Store s = Store::create(path("a.h5"), plan, prov(), false);
    const auto st = s.task_status();
    ASSERT_EQ(st.size(), n_tasks);
    EXPECT_TRUE(std::all_of(st.begin(), st.end(), [](TaskStatus x) { return x == TaskStatus::pending; }));
  }
  H5Id f(H5Fopen(path("a.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  EXPECT_EQ(read_str_attr(f.id, "format"), "rcsweep");
  EXPECT_EQ(read_int_attr(f.id, "schema_version"), store::schema_version);
  EXPECT_EQ(read_str_attr(f.id, "plan_hash"), plan.hash);
  EXPECT_EQ(read_str_attr(f.id, "config"), plan.spec.canonical_toml());
  EXPECT_EQ(read_str_attr(f.id, "finished"), "");
  EXPECT_EQ(read_str_attr(f.id, "host"), "testhost");
  EXPECT_EQ(read_str_attr(f.id, "sweep_name"), "store-test");
  EXPECT_FALSE(read_str_attr(f.id, "hdf5_version").empty());
  EXPECT_EQ(read_int_attr(f.id, "mpi_ranks"), 3);
  EXPECT_EQ(read_int_attr(f.id, "max_depth"), 3);
  EXPECT_EQ(read_int_attr(f.id, "n_points"), 8);
  EXPECT_EQ(read_int_attr(f.id, "n_tasks"), 16);
  {
    H5Id a(H5Aopen(f.id, "seed", H5P_DEFAULT));
    std::uint64_t seed = 0;
    H5Aread(a.id, H5T_NATIVE_UINT64, &seed);
    EXPECT_EQ(seed, 0xfeedbeefcafeULL);
  }

  // /layers: [n_tasks, L+1], all NaN through the fill value; the registry's description and units.
  for (const metrics::MetricInfo& metric : metrics::layer_metrics) {
    const std::string p = "/layers/" + std::string(metric.name);
    EXPECT_EQ(dims_of(f.id, p.c_str()), (std::vector<hsize_t>{16, 4})) << p;
    const auto v = read_dataset<double>(f.id, p.c_str(), H5T_NATIVE_DOUBLE);
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) << p;
    H5Id d(H5Dopen2(f.id, p.c_str(), H5P_DEFAULT));
    EXPECT_EQ(read_str_attr(d.id, "description"), metric.description) << p;
    EXPECT_EQ(read_str_attr(d.id, "units"), metric.units) << p;
  }
  // /axes
  EXPECT_EQ(read_dataset<double>(f.id, "/axes/lambda", H5T_NATIVE_DOUBLE), (std::vector<double>{0.0, 0.5}));
  EXPECT_EQ(read_dataset<std::int64_t>(f.id, "/axes/T", H5T_NATIVE_INT64), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(read_dataset<std::int64_t>(f.id, "/axes/layer", H5T_NATIVE_INT64), (std::vector<std::int64_t>{0, 1, 2, 3}));
  {
    H5Id d(H5Dopen2(f.id, "/axes/d", H5P_DEFAULT));
    EXPECT_EQ(read_str_attr(d.id, "dim"), "zip0");
    H5Id n(H5Dopen2(f.id, "/axes/norm", H5P_DEFAULT));
    EXPECT_EQ(read_str_attr(n.id, "dim"), "norm");
    H5Id t(H5Dget_type(n.id));
    EXPECT_EQ(H5Tget_class(t.id), H5T_STRING);
  }
  // /points: resolved values and the index along each dim.
  const auto lam = read_field<double>(f.id, "/points", "lambda", H5T_NATIVE_DOUBLE);
  const auto T = read_field<std::int64_t>(f.id, "/points", "T", H5T_NATIVE_INT64);
  const auto idx_zip = read_field<std::int64_t>(f.id, "/points", "idx_zip0", H5T_NATIVE_INT64);
  const auto sigma_qk = read_field<double>(f.id, "/points", "sigma_qk", H5T_NATIVE_DOUBLE);
  ASSERT_EQ(lam.size(), 8u);
  for (std::size_t p = 0; p < 8; ++p) {
    EXPECT_EQ(lam[p], plan.models[p].lambda);
    EXPECT_EQ(T[p], plan.models[p].T);
    EXPECT_EQ(idx_zip[p], static_cast<std::int64_t>(plan.spec.point_index(p)[2]));
    EXPECT_EQ(sigma_qk[p], plan.models[p].sigma_qk);
  }
  {
    struct Choice {
      char s[16];
    };
    H5Id st(H5Tcopy(H5T_C_S1));
    H5Tset_size(st.id, 16);
    H5Tset_strpad(st.id, H5T_STR_NULLPAD);
    const auto norm = read_field<Choice>(f.id, "/points", "norm", st.id);
    EXPECT_EQ(std::string(norm[0].s, strnlen(norm[0].s, 16)), "none");
    EXPECT_EQ(std::string(norm[2].s, strnlen(norm[2].s, 16)), "rms");  // lambda slowest, zip fastest
  }
  // /tasks initial state.
  EXPECT_EQ(dims_of(f.id, "/tasks"), (std::vector<hsize_t>{16}));
  const auto rank = read_field<std::int32_t>(f.id, "/tasks", "rank", H5T_NATIVE_INT32);
  const auto wall = read_field<double>(f.id, "/tasks", "wall_s", H5T_NATIVE_DOUBLE);
  const auto point = read_field<std::uint64_t>(f.id, "/tasks", "point", H5T_NATIVE_UINT64);
  for (std::size_t t = 0; t < 16; ++t) {
    EXPECT_EQ(rank[t], -1);
    EXPECT_TRUE(std::isnan(wall[t]));
    EXPECT_EQ(point[t], plan.tasks[t].point);
  }
  // /spectra layout as the plan says.
  const auto off = read_dataset<std::int64_t>(f.id, "/spectra/x_sv_offset", H5T_NATIVE_INT64);
  ASSERT_EQ(off.size(), 16u * 4u);
  for (std::uint64_t t = 0; t < 16; ++t)
    for (int l = 0; l < 4; ++l) EXPECT_EQ(off[t * 4 + l], plan.spectrum_offset(t, l));
  EXPECT_EQ(dims_of(f.id, "/spectra/x_sv"), (std::vector<hsize_t>{static_cast<hsize_t>(plan.spectrum_total())}));

  const auto info = store::read_info(path("a.h5"));
  EXPECT_EQ(info.n_pending, 16u);
  EXPECT_EQ(info.n_done, 0u);
  EXPECT_EQ(info.axes, (std::vector<std::string>{"lambda", "norm", "T", "d"}));
  EXPECT_NE(std::find(info.datasets.begin(), info.datasets.end(), "/layers/sr_cov"), info.datasets.end());
  EXPECT_NE(std::find(info.datasets.begin(), info.datasets.end(), "/spectra/x_sv"), info.datasets.end());
}

TEST_F(StoreTest, CreateOnExistingNeedsOverwrite) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  {
    Store s = Store::create(path("o.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 0)};
    s.write(batch);
  }
  const std::string msg = store_error_of([&] { Store::create(path("o.h5"), plan, prov(), false); });
  EXPECT_NE(msg.find("exists; pass --resume to continue it or --overwrite to replace it"), std::string::npos) << msg;
  EXPECT_EQ(store::read_info(path("o.h5")).n_done, 1u);  // untouched
  { Store::create(path("o.h5"), plan, prov(), true); }
  EXPECT_EQ(store::read_info(path("o.h5")).n_done, 0u);
  EXPECT_EQ(store::read_info(path("o.h5")).n_pending, plan.tasks.size());
}

TEST_F(StoreTest, ABuiltStoreIsInvisibleUntilPublishedAndRemovedIfNeverPublished) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  const auto temporaries = [&] {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(path("")))
      if (e.path().filename().string().find(".partial-") != std::string::npos) out.push_back(e.path());
    return out;
  };
  {
    Store old = Store::create(path("p.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 0)};
    old.write(batch);
  }
  const auto lock = store::WriterLock::acquire(path("p.h5"));
  {
    Store built = Store::build(lock, plan, prov());
    ASSERT_EQ(temporaries().size(), 1u);
    EXPECT_EQ(store::read_info(path("p.h5")).n_done, 1u);  // the old store, untouched
  }                                                        // closed unpublished: removed
  EXPECT_TRUE(temporaries().empty());
  EXPECT_EQ(store::read_info(path("p.h5")).n_done, 1u);
  {
    Store built = Store::build(lock, plan, prov());
    EXPECT_THROW(built.publish(/*replace=*/false), StoreError);  // a link never replaces a file
    EXPECT_EQ(store::read_info(path("p.h5")).n_done, 1u);
    built.publish(/*replace=*/true);
    EXPECT_TRUE(temporaries().empty());
    EXPECT_EQ(store::read_info(path("p.h5")).n_pending, plan.tasks.size());
    std::vector<TaskResult> batch = {fake_result(plan, 1)};
    built.write(batch);  // the published store is the one written
  }
  EXPECT_EQ(store::read_info(path("p.h5")).n_done, 1u);
  EXPECT_EQ(Store::open_resume(lock, plan, prov()).task_status()[1], TaskStatus::done);
  // Another writer is refused while the lock is held, here by `lock`.
  EXPECT_THROW(Store::open_resume(path("p.h5"), plan, prov()), store::StoreBusy);
  EXPECT_THROW(Store::create(path("p.h5"), plan, prov(), true), store::StoreBusy);
}

TEST_F(StoreTest, MixerSpectraNoneHasPlaceholderDatasets) {
  const auto plan = plan::make_plan(mixer_spec(config::Spectra::none));
  {
    Store s = Store::create(path("n.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 0)};
    s.write(batch);
  }
  H5Id f(H5Fopen(path("n.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Id g(H5Gopen2(f.id, "/spectra", H5P_DEFAULT));
  EXPECT_EQ(read_str_attr(g.id, "mixer_stored"), "none");
  for (const char* p : {"/spectra/m_sv", "/spectra/m_eig_re", "/spectra/m_eig_im"})
    EXPECT_EQ(dims_of(f.id, p), (std::vector<hsize_t>{1})) << p;
  const auto off = read_dataset<std::int64_t>(f.id, "/spectra/m_offset", H5T_NATIVE_INT64);
  EXPECT_TRUE(std::all_of(off.begin(), off.end(), [](std::int64_t o) { return o == -1; }));
}

// ---- check_output, create through a symlink, is_disk_full ---------------------------------------

// check_output refuses before any work what create would refuse, with the same message, and
// neither touches what is at the path.
TEST_F(StoreTest, CheckOutputRefusesWhatCreateRefuses) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  const auto refusals = [&](const fs::path& p, bool overwrite) {
    const auto lock = store::WriterLock::acquire(p);
    const std::string early = store_error_of([&] { store::check_output(lock, overwrite); });
    const std::string late = store_error_of([&] { Store::create(lock, plan, prov(), overwrite); });
    EXPECT_EQ(early, late) << p;
    return early;
  };
  EXPECT_EQ(refusals(path("new.h5"), false), "NO EXCEPTION");  // made by create
  EXPECT_EQ(refusals(path("new.h5"), false),
            path("new.h5").string() + " exists; pass --resume to continue it or --overwrite to replace it");
  EXPECT_EQ(refusals(path("new.h5"), true), "NO EXCEPTION");
  fs::create_directories(path("dir.h5"));
  EXPECT_EQ(refusals(path("dir.h5"), false),
            path("dir.h5").string() + " exists; pass --resume to continue it or --overwrite to replace it");
  EXPECT_EQ(refusals(path("dir.h5"), true),
            path("dir.h5").string() + " is a directory, not a store; --overwrite replaces only a file");
  EXPECT_TRUE(fs::is_directory(path("dir.h5")));
  ASSERT_EQ(::mkfifo(path("fifo.h5").c_str(), 0600), 0);
  EXPECT_EQ(refusals(path("fifo.h5"), true),
            path("fifo.h5").string() + " is not a regular file; --overwrite replaces only a store");
  EXPECT_TRUE(fs::is_fifo(path("fifo.h5")));
  for (const auto& e : fs::directory_iterator(dir_))  // no temporary left behind
    EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
}

// A store written through a symlink replaces the link's target and keeps the link.
TEST_F(StoreTest, CreateThroughASymlinkReplacesItsTarget) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  {
    Store s = Store::create(path("target.h5"), plan, prov(), false);
    s.write(std::vector<TaskResult>{fake_result(plan, 0)});
  }
  fs::create_symlink(path("target.h5"), path("link.h5"));
  EXPECT_NE(store_error_of([&] {
              Store::create(path("link.h5"), plan, prov(), false);
            }).find(path("link.h5").string() + " exists"),
            std::string::npos);
  { Store::create(path("link.h5"), plan, prov(), true); }
  EXPECT_TRUE(fs::is_symlink(path("link.h5")));
  EXPECT_EQ(fs::read_symlink(path("link.h5")), path("target.h5"));
  EXPECT_EQ(store::read_info(path("target.h5")).n_done, 0u);  // replaced
  EXPECT_EQ(store::read_info(path("target.h5")).n_pending, plan.tasks.size());
}

TEST(StoreDiskFull, IsRecognisedByTheErrnoTextOrNumber) {
  EXPECT_TRUE(store::is_disk_full("H5Dwrite: file write failed: time = ..., errno = 28, error message = 'No space "
                                  "left on device'"));
  EXPECT_TRUE(store::is_disk_full("write failed: No space left on device"));
  EXPECT_TRUE(store::is_disk_full("errno = 28"));
  EXPECT_FALSE(store::is_disk_full("errno = 5, error message = 'Input/output error'"));
  EXPECT_FALSE(store::is_disk_full("errno = 2"));
  EXPECT_FALSE(store::is_disk_full("no space left on device"));  // the system's text, as written
  EXPECT_FALSE(store::is_disk_full(""));
}
