// The HDF5 store: schema, batched writes read back bitwise with the plain HDF5 C API, resume,
// overwrite, and damaged files that must give a StoreError (never a crash).
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "metrics/metrics.hpp"
#include "models/theory.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"
#include "store_test_support.hpp"

namespace fs = std::filesystem;
using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::H5Id;
using test::store_error_of;

namespace {

config::ParamValue& base_value(config::SweepSpec& spec, std::string_view name) {
  return spec.base.at(*config::param_index(name));
}

/// 2 (lambda) x 2 (norm) x 2 (zip0: T, d) points, `replicates` replicates, depth 3.
config::SweepSpec make_spec(config::Spectra spectra, double lambda1 = 0.5, int replicates = 2, int depth = 3) {
  config::SweepSpec spec;
  spec.name = "store-test";
  spec.seed = 0xfeedbeefcafeULL;
  spec.replicates = replicates;
  for (const auto& info : config::model_params()) spec.base.push_back(info.default_value);
  base_value(spec, "T") = std::int64_t{4};
  base_value(spec, "d") = std::int64_t{6};
  base_value(spec, "depth") = std::int64_t{depth};
  spec.dims.push_back({"lambda", {"lambda"}, {{0.0, lambda1}}});
  spec.dims.push_back({"norm", {"norm"}, {{std::string("none"), std::string("rms")}}});
  spec.dims.push_back({"zip0", {"T", "d"}, {{std::int64_t{4}, std::int64_t{8}}, {std::int64_t{6}, std::int64_t{8}}}});
  spec.output.spectra = spectra;
  return spec;
}

store::Provenance prov() { return test::test_provenance(3); }

/// A deterministic fake result: every value distinct and exactly representable.
TaskResult fake_result(const plan::Plan& plan, std::uint64_t t, TaskStatus status = TaskStatus::done) {
  TaskResult r;
  r.task = t;
  r.status = status;
  r.wall_s = 0.125 * static_cast<double>(t + 1);
  r.rank = static_cast<int>(t % 3);
  r.message = status == TaskStatus::done ? "" : "diverged at layer 2: non-finite X (task " + std::to_string(t) + ")";
  const int L1 = plan.max_depth + 1;
  const int n_layers = status == TaskStatus::done ? L1 : 2;  // a diverged task stops early
  for (int l = 0; l < n_layers; ++l) {
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k)
      row[k] = static_cast<double>(t) * 1000.0 + l * 10.0 + static_cast<double>(k) + 1.0 / 3.0;
    r.layers.push_back(row);
    std::vector<double> sv;
    if (plan.spectrum_at(l))
      for (std::size_t i = 0; i < plan.spectrum_length(t); ++i)
        sv.push_back(static_cast<double>(t) + 0.01 * l + 1e-4 * static_cast<double>(i) + 1e-9);
    r.spectra.push_back(std::move(sv));
  }
  return r;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

// ---- plain HDF5 C API readers (independent of the store's own layer) ----------------------


std::vector<hsize_t> dims_of(hid_t file, const char* path) {
  H5Id d(H5Dopen2(file, path, H5P_DEFAULT));
  H5Id s(H5Dget_space(d.id));
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(s.id)));
  H5Sget_simple_extent_dims(s.id, dims.data(), nullptr);
  return dims;
}

template <class T>
std::vector<T> read_dataset(hid_t file, const char* path, hid_t mem_type) {
  H5Id d(H5Dopen2(file, path, H5P_DEFAULT));
  EXPECT_GE(d.id, 0) << path;
  H5Id s(H5Dget_space(d.id));
  std::vector<T> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s.id)));
  EXPECT_GE(H5Dread(d.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << path;
  return out;
}

/// One field of a compound dataset, read with a one-field memory type.
template <class T>
std::vector<T> read_field(hid_t file, const char* path, const char* field, hid_t field_type) {
  H5Id mem(H5Tcreate(H5T_COMPOUND, sizeof(T)));
  H5Tinsert(mem.id, field, 0, field_type);
  return read_dataset<T>(file, path, mem.id);
}

std::string read_str_attr(hid_t obj, const char* name) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT));
  if (a.id < 0) return "<missing>";
  H5Id t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.id, H5T_VARIABLE);
  H5Tset_cset(t.id, H5T_CSET_UTF8);
  char* p = nullptr;
  H5Aread(a.id, t.id, &p);
  std::string out = p ? p : "";
  H5free_memory(p);
  return out;
}

std::int64_t read_int_attr(hid_t obj, const char* name) {
  H5Id a(H5Aopen(obj, name, H5P_DEFAULT));
  std::int64_t v = -999;
  H5Aread(a.id, H5T_NATIVE_INT64, &v);
  return v;
}

class StoreTest : public test::StoreDirTest {};


}  // namespace

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
  EXPECT_EQ(read_int_attr(f.id, "schema_version"), 1);
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

  // /layers: [n_tasks, L+1], all NaN through the fill value.
  for (auto name : metrics::layer_metric_names) {
    const std::string p = "/layers/" + std::string(name);
    EXPECT_EQ(dims_of(f.id, p.c_str()), (std::vector<hsize_t>{16, 4})) << p;
    const auto v = read_dataset<double>(f.id, p.c_str(), H5T_NATIVE_DOUBLE);
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) << p;
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

TEST_F(StoreTest, BatchWriteReadsBackBitwise) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::all));
  const std::vector<std::uint64_t> ids = {9, 0, 1, 2, 15, 5, 6};  // unordered, some consecutive
  std::vector<TaskResult> batch;
  for (auto t : ids) batch.push_back(fake_result(plan, t, t == 6 ? TaskStatus::diverged : TaskStatus::done));
  {
    Store s = Store::create(path("b.h5"), plan, prov(), false);
    s.write(batch);
    s.mark_finished("2026-01-02T00:00:00Z");
    s.sync();
  }
  H5Id f(H5Fopen(path("b.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  EXPECT_EQ(read_str_attr(f.id, "finished"), "2026-01-02T00:00:00Z");
  const std::size_t L1 = 4;
  for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k) {
    const std::string p = "/layers/" + std::string(metrics::layer_metric_names[k]);
    const auto v = read_dataset<double>(f.id, p.c_str(), H5T_NATIVE_DOUBLE);
    for (std::uint64_t t = 0; t < 16; ++t) {
      const auto it = std::find(ids.begin(), ids.end(), t);
      for (std::size_t l = 0; l < L1; ++l) {
        const double got = v[t * L1 + l];
        if (it == ids.end() || l >= batch[static_cast<std::size_t>(it - ids.begin())].layers.size())
          EXPECT_TRUE(std::isnan(got)) << p << " t=" << t << " l=" << l;
        else
          EXPECT_TRUE(same_bits(got, batch[static_cast<std::size_t>(it - ids.begin())].layers[l][k]))
              << p << " t=" << t << " l=" << l;
      }
    }
  }
  const auto sv = read_dataset<double>(f.id, "/spectra/x_sv", H5T_NATIVE_DOUBLE);
  std::size_t written = 0;
  for (std::uint64_t t = 0; t < 16; ++t) {
    const auto it = std::find(ids.begin(), ids.end(), t);
    for (int l = 0; l < 4; ++l) {
      const auto off = static_cast<std::size_t>(plan.spectrum_offset(t, l));
      for (std::size_t i = 0; i < plan.spectrum_length(t); ++i) {
        const TaskResult* r = it == ids.end() ? nullptr : &batch[static_cast<std::size_t>(it - ids.begin())];
        if (r && static_cast<std::size_t>(l) < r->spectra.size()) {
          EXPECT_TRUE(same_bits(sv[off + i], r->spectra[l][i])) << "t=" << t << " l=" << l << " i=" << i;
          ++written;
        } else {
          EXPECT_TRUE(std::isnan(sv[off + i])) << "t=" << t << " l=" << l << " i=" << i;
        }
      }
    }
  }
  EXPECT_GT(written, 0u);

  const auto status = read_field<std::int8_t>(f.id, "/tasks", "status", H5T_NATIVE_INT8);
  const auto wall = read_field<double>(f.id, "/tasks", "wall_s", H5T_NATIVE_DOUBLE);
  const auto rank = read_field<std::int32_t>(f.id, "/tasks", "rank", H5T_NATIVE_INT32);
  struct Msg {
    char s[256];
  };
  H5Id mt(H5Tcopy(H5T_C_S1));
  H5Tset_size(mt.id, 256);
  const auto msg = read_field<Msg>(f.id, "/tasks", "message", mt.id);
  for (std::uint64_t t = 0; t < 16; ++t) {
    const auto it = std::find(ids.begin(), ids.end(), t);
    if (it == ids.end()) {
      EXPECT_EQ(status[t], 0) << t;
      EXPECT_EQ(rank[t], -1);
      continue;
    }
    const TaskResult& r = batch[static_cast<std::size_t>(it - ids.begin())];
    EXPECT_EQ(status[t], static_cast<std::int8_t>(r.status)) << t;
    EXPECT_TRUE(same_bits(wall[t], r.wall_s));
    EXPECT_EQ(rank[t], r.rank);
    EXPECT_EQ(std::string(msg[t].s, strnlen(msg[t].s, 256)), r.message);
  }
  const auto info = store::read_info(path("b.h5"));
  EXPECT_EQ(info.n_done, 6u);
  EXPECT_EQ(info.n_diverged, 1u);
  EXPECT_EQ(info.n_pending, 9u);
  EXPECT_EQ(info.finished, "2026-01-02T00:00:00Z");
}

TEST_F(StoreTest, LongMessageIsCutAt255Bytes) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  TaskResult r = fake_result(plan, 3, TaskStatus::failed);
  r.message = std::string(300, 'x');
  Store s = Store::create(path("m.h5"), plan, prov(), false);
  s.write(std::span<const TaskResult>(&r, 1));
  H5Id f(H5Fopen(path("m.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  struct Msg {
    char s[256];
  };
  H5Id mt(H5Tcopy(H5T_C_S1));
  H5Tset_size(mt.id, 256);
  const auto msg = read_field<Msg>(f.id, "/tasks", "message", mt.id);
  EXPECT_EQ(std::string(msg[3].s, strnlen(msg[3].s, 256)), std::string(255, 'x'));
  EXPECT_EQ(s.task_status()[3], TaskStatus::failed);
}

TEST_F(StoreTest, BadResultIsRefusedBeforeAnythingIsWritten) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  Store s = Store::create(path("bad.h5"), plan, prov(), false);
  std::vector<TaskResult> batch = {fake_result(plan, 1), fake_result(plan, 2)};
  batch[1].spectra.back().push_back(1.0);  // one value too many
  EXPECT_NE(store_error_of([&] { s.write(batch); }).find("spectrum"), std::string::npos);
  batch[1] = fake_result(plan, 2);
  batch[1].task = 99;
  EXPECT_NE(store_error_of([&] { s.write(batch); }).find("task 99"), std::string::npos);
  const auto st = s.task_status();
  EXPECT_TRUE(std::all_of(st.begin(), st.end(), [](TaskStatus x) { return x == TaskStatus::pending; }));
}

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

TEST_F(StoreTest, LargeShuffledBatchIsOneCheapWrite) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::all, 0.5, /*replicates=*/250, /*depth=*/20));
  const std::size_t n = plan.tasks.size();
  ASSERT_EQ(n, 2000u);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t t = 0; t < n; t += (t % 5 == 0 ? 2 : 1)) ids.push_back(t);  // gaps: many runs
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(7));
  std::vector<TaskResult> batch;
  for (auto t : ids) batch.push_back(fake_result(plan, t));
  Store s = Store::create(path("big.h5"), plan, prov(), false);
  const auto t0 = std::chrono::steady_clock::now();
  s.write(batch);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %zu results (%zu layers each, spectra all) in %.3f s\n", batch.size(),
              static_cast<std::size_t>(plan.max_depth + 1), secs);
  EXPECT_LT(secs, 10.0);
  const auto st = s.task_status();
  EXPECT_EQ(static_cast<std::size_t>(std::count(st.begin(), st.end(), TaskStatus::done)), ids.size());
  H5Id f(H5Fopen(path("big.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  const auto v = read_dataset<double>(f.id, "/layers/m_gap", H5T_NATIVE_DOUBLE);
  const auto sv = read_dataset<double>(f.id, "/spectra/x_sv", H5T_NATIVE_DOUBLE);
  for (const auto& r : batch) {
    EXPECT_TRUE(same_bits(v[r.task * 21 + 20], r.layers[20][11]));
    EXPECT_TRUE(same_bits(sv[static_cast<std::size_t>(plan.spectrum_offset(r.task, 7)) + 1], r.spectra[7][1]));
  }
}

TEST_F(StoreTest, SigkilledWriterLeavesAResumableStore) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::all));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the writer: two batches, then killed without closing the file
    try {
      Store s = Store::create(path("killed.h5"), plan, prov(), false);
      std::vector<TaskResult> b1 = {fake_result(plan, 0), fake_result(plan, 1)};
      s.write(b1);
      std::vector<TaskResult> b2 = {fake_result(plan, 5, TaskStatus::diverged)};
      s.write(b2);
    } catch (...) {
      ::_exit(3);
    }
    std::raise(SIGKILL);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  const auto info = store::read_info(path("killed.h5"));
  EXPECT_EQ(info.n_done, 2u);
  EXPECT_EQ(info.n_diverged, 1u);
  EXPECT_EQ(info.finished, "");
  Store s = Store::open_resume(path("killed.h5"), plan, prov());
  EXPECT_EQ(s.task_status()[1], TaskStatus::done);
  std::vector<TaskResult> b3 = {fake_result(plan, 2)};
  s.write(b3);
  EXPECT_EQ(s.task_status()[2], TaskStatus::done);
}

// ---- damaged and foreign files ----------------------------------------------------------------

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

TEST_F(DamagedStoreTest, SchemaVersion2) {
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Adelete(f.id, "schema_version");
    H5Id sp(H5Screate(H5S_SCALAR));
    H5Id a(H5Acreate2(f.id, "schema_version", H5T_STD_I32LE, sp.id, H5P_DEFAULT, H5P_DEFAULT));
    const int v = 2;
    H5Awrite(a.id, H5T_NATIVE_INT, &v);
  }
  expect_refused(path("real.h5"), "schema version 2, this rcsweep reads 1");
}

TEST_F(DamagedStoreTest, StoreWithoutTasksDataset) {
  real_store_bytes();
  {
    H5Id f(H5Fopen(path("real.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Ldelete(f.id, "tasks", H5P_DEFAULT);
  }
  expect_refused(path("real.h5"), "damaged rcsweep store");
}

// ---- /theory (lambda-skip Theorem 4.1) ---------------------------------------------------------

namespace {
/// Distinct, exactly representable theory values; some NaN (b when the condition fails) and 0/1 flags.
models::TheoryRow fake_theory(std::uint64_t t) {
  models::TheoryRow row;
  for (std::size_t k = 0; k < row.size(); ++k) row[k] = static_cast<double>(t) * 100.0 + static_cast<double>(k) + 0.25;
  if (t % 2 == 1) row[4] = std::numeric_limits<double>::quiet_NaN();  // b: condition fails
  row[5] = static_cast<double>(t % 2 == 0);
  row[6] = static_cast<double>(t % 3 == 0);
  return row;
}
}  // namespace

TEST_F(StoreTest, TheoryDatasetsCreatedNaNAndWrittenBitwise) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  const std::uint64_t n_tasks = plan.tasks.size();
  const std::vector<std::uint64_t> ids = {7, 0, 1, 2, 12, 3};
  std::vector<TaskResult> batch;
  for (auto t : ids) {
    TaskResult r = fake_result(plan, t, t == 3 ? TaskStatus::diverged : TaskStatus::done);
    if (t != 2) r.theory = fake_theory(t);  // task 2 keeps the all-NaN default
    batch.push_back(std::move(r));
  }
  TaskResult failed;
  failed.task = 9;
  failed.status = TaskStatus::failed;
  failed.message = "failed: fake";
  batch.push_back(failed);
  EXPECT_TRUE(std::all_of(failed.theory.begin(), failed.theory.end(), [](double x) { return std::isnan(x); }));
  {
    Store s = Store::create(path("th.h5"), plan, prov(), false);
    H5Id f(H5Fopen(path("th.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(f.id, 0);
    for (auto name : models::theory_names) {  // at creation: [n_tasks], all NaN, described
      const std::string p = "/theory/" + std::string(name);
      EXPECT_EQ(dims_of(f.id, p.c_str()), (std::vector<hsize_t>{n_tasks})) << p;
      const auto v = read_dataset<double>(f.id, p.c_str(), H5T_NATIVE_DOUBLE);
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) << p;
      H5Id d(H5Dopen2(f.id, p.c_str(), H5P_DEFAULT));
      H5Id type(H5Dget_type(d.id));
      EXPECT_TRUE(H5Tequal(type.id, H5T_IEEE_F64LE) > 0) << p;
      const std::string desc = read_str_attr(d.id, "description");
      EXPECT_NE(desc.find("NaN for a task not done"), std::string::npos) << p << ": " << desc;
    }
  }
  {
    Store s = Store::open_resume(path("th.h5"), plan, prov());  // a store with /theory resumes
    s.write(batch);
  }
  H5Id f(H5Fopen(path("th.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  for (std::size_t k = 0; k < models::n_theory; ++k) {
    const std::string p = "/theory/" + std::string(models::theory_names[k]);
    const auto v = read_dataset<double>(f.id, p.c_str(), H5T_NATIVE_DOUBLE);
    ASSERT_EQ(v.size(), n_tasks);
    for (std::uint64_t t = 0; t < n_tasks; ++t) {
      const bool written = std::find(ids.begin(), ids.end(), t) != ids.end() && t != 2;
      const double want = written ? fake_theory(t)[k] : std::numeric_limits<double>::quiet_NaN();
      EXPECT_TRUE(same_bits(v[t], want)) << p << " task " << t << ": " << v[t] << " vs " << want;
    }
  }
  const auto info = store::read_info(path("th.h5"));
  EXPECT_NE(std::find(info.datasets.begin(), info.datasets.end(), "/theory/lambda_min"), info.datasets.end());
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

// ---- /spectra/m_* (mixer spectra) --------------------------------------------------------------

namespace {
/// Fake mixer spectra for every layer the task reached whose mixer spectrum the plan stores:
/// distinct, exactly representable values (eigenvalues with a sign pattern, some zero imag).
void add_fake_mixer(const plan::Plan& plan, TaskResult& r) {
  const std::size_t n = r.layers.size();
  r.mixer_sv.assign(n, {});
  r.mixer_eig_re.assign(n, {});
  r.mixer_eig_im.assign(n, {});
  for (std::size_t l = 0; l < n; ++l) {
    if (!plan.mixer_spectrum_at(static_cast<int>(l))) continue;
    for (std::size_t i = 0; i < plan.mixer_spectrum_length(r.task); ++i) {
      const double base = static_cast<double>(r.task) + 0.0625 * static_cast<double>(l) + 1e-3 * static_cast<double>(i);
      r.mixer_sv[l].push_back(base + 1e-9);
      r.mixer_eig_re[l].push_back(-base - 1.0 / 3.0);
      r.mixer_eig_im[l].push_back(i % 3 == 0 ? 0.0 : (i % 2 ? 1.0 : -1.0) * (base + 0.2));
    }
  }
}

config::SweepSpec mixer_spec(config::Spectra mixer) {
  auto spec = make_spec(config::Spectra::last);
  spec.output.mixer_spectra = mixer;
  return spec;
}
}  // namespace

TEST_F(StoreTest, MixerSpectraCreatedAndWrittenBitwise) {
  const auto plan = plan::make_plan(mixer_spec(config::Spectra::all));
  const std::uint64_t n_tasks = plan.tasks.size();
  const std::size_t L1 = static_cast<std::size_t>(plan.max_depth) + 1;
  ASSERT_GT(plan.mixer_spectrum_total(), 0);
  const std::vector<std::uint64_t> ids = {5, 0, 1, 3, 12, 2};
  std::vector<TaskResult> batch;
  for (auto t : ids) {
    TaskResult r = fake_result(plan, t, t == 3 ? TaskStatus::diverged : TaskStatus::done);  // 3: layers 0, 1
    add_fake_mixer(plan, r);
    batch.push_back(std::move(r));
  }
  TaskResult failed;  // no rows at all
  failed.task = 9;
  failed.status = TaskStatus::failed;
  batch.push_back(failed);
  {
    Store s = Store::create(path("m.h5"), plan, prov(), false);
    H5Id f(H5Fopen(path("m.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(f.id, 0);
    H5Id g(H5Gopen2(f.id, "/spectra", H5P_DEFAULT));
    EXPECT_EQ(read_str_attr(g.id, "mixer_stored"), "all");
    EXPECT_EQ(read_str_attr(g.id, "stored"), "last");
    const auto total = static_cast<hsize_t>(plan.mixer_spectrum_total());
    for (const char* p : {"/spectra/m_sv", "/spectra/m_eig_re", "/spectra/m_eig_im"}) {
      EXPECT_EQ(dims_of(f.id, p), (std::vector<hsize_t>{total})) << p;
      const auto v = read_dataset<double>(f.id, p, H5T_NATIVE_DOUBLE);
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) << p;
      H5Id d(H5Dopen2(f.id, p, H5P_DEFAULT));
      H5Id type(H5Dget_type(d.id));
      EXPECT_TRUE(H5Tequal(type.id, H5T_IEEE_F64LE) > 0) << p;
      EXPECT_NE(read_str_attr(d.id, "description"), "<missing>") << p;
    }
    EXPECT_EQ(dims_of(f.id, "/spectra/m_offset"), (std::vector<hsize_t>{n_tasks, L1}));
    EXPECT_EQ(dims_of(f.id, "/spectra/m_length"), (std::vector<hsize_t>{n_tasks}));
    const auto off = read_dataset<std::int64_t>(f.id, "/spectra/m_offset", H5T_NATIVE_INT64);
    const auto len = read_dataset<std::int64_t>(f.id, "/spectra/m_length", H5T_NATIVE_INT64);
    for (std::uint64_t t = 0; t < n_tasks; ++t) {
      EXPECT_EQ(len[t], plan.models[plan.tasks[t].point].T);
      EXPECT_EQ(off[t * L1], -1);  // layer 0 has no mixer
      for (std::size_t l = 0; l < L1; ++l)
        EXPECT_EQ(off[t * L1 + l], plan.mixer_spectrum_offset(t, static_cast<int>(l)));
    }
  }
  {
    Store s = Store::open_resume(path("m.h5"), plan, prov());
    s.write(batch);
  }
  H5Id f(H5Fopen(path("m.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(f.id, 0);
  const auto sv = read_dataset<double>(f.id, "/spectra/m_sv", H5T_NATIVE_DOUBLE);
  const auto re = read_dataset<double>(f.id, "/spectra/m_eig_re", H5T_NATIVE_DOUBLE);
  const auto im = read_dataset<double>(f.id, "/spectra/m_eig_im", H5T_NATIVE_DOUBLE);
  std::vector<bool> covered(sv.size(), false);
  for (const TaskResult& r : batch) {
    for (std::size_t l = 0; l < r.mixer_sv.size(); ++l) {
      if (r.mixer_sv[l].empty()) continue;
      const auto o = static_cast<std::size_t>(plan.mixer_spectrum_offset(r.task, static_cast<int>(l)));
      for (std::size_t i = 0; i < r.mixer_sv[l].size(); ++i) {
        EXPECT_TRUE(same_bits(sv[o + i], r.mixer_sv[l][i])) << r.task << " " << l << " " << i;
        EXPECT_TRUE(same_bits(re[o + i], r.mixer_eig_re[l][i])) << r.task << " " << l << " " << i;
        EXPECT_TRUE(same_bits(im[o + i], r.mixer_eig_im[l][i])) << r.task << " " << l << " " << i;
        covered[o + i] = true;
      }
    }
  }
  std::size_t n_covered = 0;
  for (std::size_t i = 0; i < sv.size(); ++i) {
    if (covered[i]) {
      ++n_covered;
      continue;
    }
    EXPECT_TRUE(std::isnan(sv[i]) && std::isnan(re[i]) && std::isnan(im[i])) << i;  // never written
  }
  // 5 done tasks with 3 mixer layers each, the diverged one with layer 1 only
  std::size_t want = 0;
  for (auto t : ids) want += (t == 3 ? 1u : 3u) * plan.mixer_spectrum_length(t);
  EXPECT_EQ(n_covered, want);
  // the X spectra are untouched by the mixer ones (stored = last)
  const auto xsv = read_dataset<double>(f.id, "/spectra/x_sv", H5T_NATIVE_DOUBLE);
  const auto o5 = static_cast<std::size_t>(plan.spectrum_offset(5, plan.max_depth));
  EXPECT_TRUE(same_bits(xsv[o5], batch[0].spectra[static_cast<std::size_t>(plan.max_depth)][0]));
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

TEST_F(StoreTest, BadMixerResultIsRefusedBeforeAnythingIsWritten) {
  const auto plan = plan::make_plan(mixer_spec(config::Spectra::last));
  Store s = Store::create(path("bad.h5"), plan, prov(), false);
  const auto L = static_cast<std::size_t>(plan.max_depth);
  auto good = fake_result(plan, 0);
  add_fake_mixer(plan, good);
  ASSERT_FALSE(good.mixer_sv[L].empty());
  auto too_long = good;
  too_long.mixer_sv[L].push_back(1.0);
  auto eig_short = good;
  eig_short.mixer_eig_im[L].pop_back();
  auto wrong_layer = good;  // layer 1 is not stored with "last"
  wrong_layer.mixer_sv[1] = good.mixer_sv[L];
  wrong_layer.mixer_eig_re[1] = good.mixer_eig_re[L];
  wrong_layer.mixer_eig_im[1] = good.mixer_eig_im[L];
  auto eig_only = good;  // eigenvalues without singular values
  eig_only.mixer_sv[L].clear();
  for (const TaskResult* bad : {&too_long, &eig_short, &wrong_layer, &eig_only}) {
    std::vector<TaskResult> batch = {fake_result(plan, 1), *bad};
    const std::string msg = store_error_of([&] { s.write(batch); });
    EXPECT_NE(msg.find("mixer spectrum"), std::string::npos) << msg;
  }
  EXPECT_EQ(s.task_status()[1], TaskStatus::pending);  // nothing of the batches was written
  std::vector<TaskResult> ok = {good};
  s.write(ok);
  EXPECT_EQ(s.task_status()[0], TaskStatus::done);
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

// /grad: log10_g and stderr [n_tasks, L_max] hold the last output depth, log10_g_all and
// stderr_all [n_tasks, L_max, L_max] every depth; a task without gradients stays NaN.
TEST_F(StoreTest, GradientNormsCreatedAndWrittenBitwise) {
  for (auto mode : {config::Spectra::last, config::Spectra::all}) {
    auto spec = make_spec(config::Spectra::none);
    spec.output.gradients = mode;
    spec.output.grad_probes = 5;
    const auto plan = plan::make_plan(spec);
    const std::size_t L = static_cast<std::size_t>(plan.max_depth), n_depths = plan.gradient_depths().size();
    ASSERT_EQ(n_depths, mode == config::Spectra::all ? L : 1u);
    std::vector<TaskResult> batch;
    for (std::uint64_t t : {4u, 1u, 2u}) {
      TaskResult r = fake_result(plan, t, TaskStatus::done);
      for (std::size_t i = 0; i < n_depths * L; ++i) {
        r.grad_log10.push_back(static_cast<double>(t) + 0.01 * static_cast<double>(i) + 1.0 / 3.0);
        r.grad_stderr.push_back(1e-3 * static_cast<double>(i + t));
      }
      batch.push_back(std::move(r));
    }
    batch.push_back(fake_result(plan, 6, TaskStatus::failed));  // no gradients: NaN
    const std::string file = mode == config::Spectra::all ? "g_all.h5" : "g_last.h5";
    { Store::create(path(file), plan, prov(), false).write(batch); }
    { Store s = Store::open_resume(path(file), plan, prov()); }  // the /grad layout is accepted on resume
    H5Id f(H5Fopen(path(file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(f.id, 0);
    H5Id g(H5Gopen2(f.id, "/grad", H5P_DEFAULT));
    EXPECT_EQ(read_str_attr(g.id, "stored"), mode == config::Spectra::all ? "all" : "last");
    EXPECT_EQ(read_str_attr(g.id, "method"), "auto");
    const std::uint64_t n = plan.tasks.size();
    EXPECT_EQ(dims_of(f.id, "/grad/log10_g"), (std::vector<hsize_t>{n, L}));
    EXPECT_EQ(dims_of(f.id, "/grad/stderr"), (std::vector<hsize_t>{n, L}));
    const auto lg = read_dataset<double>(f.id, "/grad/log10_g", H5T_NATIVE_DOUBLE);
    const auto se = read_dataset<double>(f.id, "/grad/stderr", H5T_NATIVE_DOUBLE);
    for (const TaskResult& r : batch)
      for (std::size_t l = 0; l < L; ++l) {
        const std::size_t at = r.task * L + l;
        if (r.grad_log10.empty()) {
          EXPECT_TRUE(std::isnan(lg[at]) && std::isnan(se[at]));
          continue;
        }
        EXPECT_TRUE(same_bits(lg[at], r.grad_log10[(n_depths - 1) * L + l])) << r.task << " " << l;
        EXPECT_TRUE(same_bits(se[at], r.grad_stderr[(n_depths - 1) * L + l])) << r.task << " " << l;
      }
    EXPECT_TRUE(std::isnan(lg[0]));  // task 0 not written
    if (mode == config::Spectra::all) {
      EXPECT_EQ(dims_of(f.id, "/grad/log10_g_all"), (std::vector<hsize_t>{n, L, L}));
      const auto all = read_dataset<double>(f.id, "/grad/log10_g_all", H5T_NATIVE_DOUBLE);
      for (const TaskResult& r : batch)
        for (std::size_t i = 0; i < L * L && !r.grad_log10.empty(); ++i)
          EXPECT_TRUE(same_bits(all[r.task * L * L + i], r.grad_log10[i]));
    } else {
      EXPECT_LT(H5Lexists(f.id, "/grad/log10_g_all", H5P_DEFAULT), 1);
    }
  }
  // without [output] gradients there is no /grad
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  { Store s = Store::create(path("nog.h5"), plan, prov(), false); }
  H5Id f(H5Fopen(path("nog.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(H5Lexists(f.id, "/grad", H5P_DEFAULT), 0);
}

// ---- /provenance: which platform computed each task ---------------------------------------

// Platforms are recorded per task, read back with the results (so a merge carries them), and
// counted per platform among finished tasks; a new platform on resume is appended to the table.
TEST_F(StoreTest, PlatformsAreRecordedPerTaskAndCounted) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  const store::Platform avx512{"OpenBLAS 0.3.21 Cooperlake", "AMD EPYC (family 25, model 17)", "node1"};
  const store::Platform avx2{"OpenBLAS 0.3.21 Haswell", "Intel Xeon (family 6, model 85)", "node2"};
  {
    Store s = Store::create(path("p.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 1), fake_result(plan, 2),
                                     fake_result(plan, 5, TaskStatus::diverged)};
    for (auto& r : batch) r.platform = avx512;
    s.write(batch);
    ASSERT_EQ(s.finished_by_platform().size(), 1u);
    EXPECT_EQ(s.finished_by_platform().front().first, avx512);
    EXPECT_EQ(s.finished_by_platform().front().second, 3u);
  }
  {
    Store s = Store::open_resume(path("p.h5"), plan, prov());
    std::vector<TaskResult> batch = {fake_result(plan, 0), fake_result(plan, 9), fake_result(plan, 3)};
    batch[0].platform = avx2;
    batch[1].platform = avx512;  // batch[2]: not recorded
    s.write(batch);
    const std::vector<std::uint64_t> ids = {0, 1, 2, 3, 4, 5, 9};
    const auto back = s.read_results(ids);
    EXPECT_EQ(back[0].platform, avx2);
    EXPECT_EQ(back[1].platform, avx512);
    EXPECT_EQ(back[2].platform, avx512);
    EXPECT_TRUE(back[3].platform.empty());
    EXPECT_TRUE(back[4].platform.empty());  // pending
    EXPECT_EQ(back[5].platform, avx512);
    EXPECT_EQ(back[6].platform, avx512);
  }
  const auto info = store::read_info(path("p.h5"));
  ASSERT_EQ(info.platforms.size(), 3u);
  EXPECT_EQ(info.platforms[0], std::make_pair(avx512, std::uint64_t{4}));
  EXPECT_EQ(info.platforms[1], std::make_pair(avx2, std::uint64_t{1}));
  EXPECT_TRUE(info.platforms[2].first.empty());
  EXPECT_EQ(info.platforms[2].second, 1u);
  // The layout readers rely on: one line per platform in each attribute, indices per task.
  H5Id f(H5Fopen(path("p.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Id g(H5Gopen2(f.id, "/provenance", H5P_DEFAULT));
  EXPECT_EQ(read_str_attr(g.id, "blas_kernels"), avx512.blas_kernel + "\n" + avx2.blas_kernel);
  EXPECT_EQ(read_str_attr(g.id, "cpus"), avx512.cpu + "\n" + avx2.cpu);
  EXPECT_EQ(read_str_attr(g.id, "hosts"), avx512.host + "\n" + avx2.host);
  const auto index = read_dataset<std::int16_t>(f.id, "/provenance/platform", H5T_NATIVE_INT16);
  ASSERT_EQ(index.size(), plan.tasks.size());
  EXPECT_EQ(index[0], 1);
  EXPECT_EQ(index[1], 0);
  EXPECT_EQ(index[3], -1);
  EXPECT_EQ(index[4], -1);
  EXPECT_EQ(index[9], 0);
}

// A store made before /provenance: readable (its finished tasks count as not recorded), and a
// resume adds the column so that the tasks it computes are recorded.
TEST_F(StoreTest, StoreWithoutProvenanceGetsItOnResume) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  {
    Store s = Store::create(path("old.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 1)};
    s.write(batch);
  }
  {
    H5Id f(H5Fopen(path("old.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f.id, "provenance", H5P_DEFAULT), 0);
  }
  auto info = store::read_info(path("old.h5"));
  ASSERT_EQ(info.platforms.size(), 1u);
  EXPECT_TRUE(info.platforms[0].first.empty());
  {
    Store s = Store::open_resume(path("old.h5"), plan, prov());
    std::vector<TaskResult> batch = {fake_result(plan, 2)};
    batch[0].platform = {"OpenBLAS 0.3.21 Zen", "AMD EPYC (family 25, model 1)", "node1"};
    s.write(batch);
  }
  info = store::read_info(path("old.h5"));
  ASSERT_EQ(info.platforms.size(), 2u);
  EXPECT_EQ(info.platforms[0].first.blas_kernel, "OpenBLAS 0.3.21 Zen");
  EXPECT_TRUE(info.platforms[1].first.empty());
}

// A store whose /provenance predates the hosts attribute: its platforms read with an empty host,
// and a resume on a named host appends a platform (the attribute is written again, whole).
TEST_F(StoreTest, StoreWithoutHostsReadsEmptyHosts) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  const store::Platform zen{"OpenBLAS 0.3.21 Zen", "AMD EPYC (family 25, model 1)", "node1"};
  {
    Store s = Store::create(path("nohost.h5"), plan, prov(), false);
    std::vector<TaskResult> batch = {fake_result(plan, 1)};
    batch[0].platform = zen;
    s.write(batch);
  }
  {
    H5Id f(H5Fopen(path("nohost.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Adelete_by_name(f.id, "/provenance", "hosts", H5P_DEFAULT), 0);
  }
  auto info = store::read_info(path("nohost.h5"));
  ASSERT_EQ(info.platforms.size(), 1u);
  EXPECT_EQ(info.platforms[0].first, (store::Platform{zen.blas_kernel, zen.cpu, ""}));
  {
    Store s = Store::open_resume(path("nohost.h5"), plan, prov());
    std::vector<TaskResult> batch = {fake_result(plan, 2)};
    batch[0].platform = zen;
    s.write(batch);
  }
  info = store::read_info(path("nohost.h5"));
  ASSERT_EQ(info.platforms.size(), 2u);
  EXPECT_EQ(info.platforms[0].first.host, "");
  EXPECT_EQ(info.platforms[1].first, zen);
}
