// Writing results (src/store/store.cpp): batches of rows read back bitwise with the plain HDF5 C
// API (/layers, /spectra, /tasks, /theory, mixer spectra, /grad), bad results refused before
// anything is written, long messages cut, and a writer killed between batches leaving a store
// that resumes.
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <span>
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
using test::dims_of;
using test::fake_result;
using test::H5Id;
using test::make_spec;
using test::mixer_spec;
using test::prov;
using test::read_dataset;
using test::read_field;
using test::read_str_attr;
using test::same_bits;
using test::store_error_of;
using test::StoreTest;

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

}  // namespace

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

TEST_F(StoreTest, LargeShuffledBatchInOneWrite) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::all, 0.5, /*replicates=*/250, /*depth=*/20));
  const std::size_t n = plan.tasks.size();
  ASSERT_EQ(n, 2000u);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t t = 0; t < n; t += (t % 5 == 0 ? 2 : 1)) ids.push_back(t);  // gaps: many runs
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(7));
  std::vector<TaskResult> batch;
  for (auto t : ids) batch.push_back(fake_result(plan, t));
  // One call writes the whole shuffled batch (its speed is measured by bench/bench_writer.cpp,
  // docs/BENCHMARKS.md, not here).
  Store s = Store::create(path("big.h5"), plan, prov(), false);
  s.write(batch);
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

// ---- read_results, note_reused, the status names ----------------------------------------------

namespace {

/// The bytes of every dataset below /layers, /spectra, /theory, /grad and of /tasks, each read in
/// its own file type (no conversion), by path.
std::map<std::string, std::string> result_bytes(const fs::path& p) {
  H5Id f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_GE(f.id, 0) << p;
  std::vector<std::string> paths = {"/tasks"};
  for (const char* group : {"/layers", "/spectra", "/theory", "/grad"}) {
    if (H5Lexists(f.id, group, H5P_DEFAULT) <= 0) continue;
    H5Id g(H5Gopen2(f.id, group, H5P_DEFAULT));
    H5G_info_t info{};
    H5Gget_info(g.id, &info);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[256] = {};
      H5Lget_name_by_idx(g.id, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
      paths.push_back(std::string(group) + "/" + name);
    }
  }
  std::map<std::string, std::string> out;
  for (const auto& path : paths) {
    H5Id d(H5Dopen2(f.id, path.c_str(), H5P_DEFAULT));
    H5Id type(H5Dget_type(d.id));
    H5Id space(H5Dget_space(d.id));
    std::string bytes(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id)) * H5Tget_size(type.id), '\0');
    EXPECT_GE(H5Dread(d.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0) << path;
    out[path] = std::move(bytes);
  }
  return out;
}

}  // namespace

// What read_results gives, written into another store of the same plan, reproduces every row
// bitwise: layers, X and mixer spectra, theory, gradients, the task table (NaN, message, wall time
// and rank included), and each task's platform.
TEST_F(StoreTest, ReadResultsWrittenElsewhereReproduceTheRowsBitwise) {
  auto spec = mixer_spec(config::Spectra::all);
  spec.output.spectra = config::Spectra::all;
  spec.output.gradients = config::Spectra::all;
  spec.output.grad_probes = 5;
  const auto plan = plan::make_plan(spec);
  const std::size_t L = static_cast<std::size_t>(plan.max_depth);
  std::vector<TaskResult> batch;
  const std::vector<std::uint64_t> ids = {6, 0, 3, 12, 9, 4};
  for (const auto t : ids) {
    const TaskStatus status = t == 3    ? TaskStatus::diverged
                              : t == 12 ? TaskStatus::vanished
                              : t == 9  ? TaskStatus::failed
                                        : TaskStatus::done;
    TaskResult r = fake_result(plan, t, status);
    if (status == TaskStatus::failed) {  // no rows at all
      r.layers.clear();
      r.spectra.clear();
      r.message = "failed: out of memory";
    } else {
      add_fake_mixer(plan, r);
      r.theory = fake_theory(t);
    }
    if (status == TaskStatus::done)
      for (std::size_t i = 0; i < L * L; ++i) {
        r.grad_log10.push_back(static_cast<double>(t) - 0.125 * static_cast<double>(i));
        r.grad_stderr.push_back(std::numeric_limits<double>::quiet_NaN());
      }
    r.platform = {"kernel " + std::to_string(t % 2), "cpu", "host" + std::to_string(t)};
    batch.push_back(std::move(r));
  }
  batch[1].rank = 7;
  batch[1].wall_s = std::numeric_limits<double>::quiet_NaN();
  { Store::create(path("a.h5"), plan, prov(), false).write(batch); }
  std::vector<TaskResult> back;
  {
    Store a = Store::open_read(path("a.h5"), plan);
    back = a.read_results(ids);
  }
  ASSERT_EQ(back.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(back[i].task, ids[i]);
    EXPECT_EQ(back[i].status, batch[i].status) << ids[i];
    EXPECT_EQ(back[i].message, batch[i].message) << ids[i];
    EXPECT_EQ(back[i].platform, batch[i].platform) << ids[i];
    EXPECT_EQ(back[i].layers.size(), L + 1) << ids[i];  // every layer, NaN where not reached
  }
  { Store::create(path("b.h5"), plan, prov(), false).write(back); }
  const auto a = result_bytes(path("a.h5")), b = result_bytes(path("b.h5"));
  for (const char* name :
       {"/tasks", "/spectra/x_sv", "/spectra/m_sv", "/spectra/m_eig_re", "/spectra/m_eig_im", "/grad/log10_g",
        "/grad/stderr", "/grad/log10_g_all", "/grad/stderr_all", "/theory/lambda_min", "/layers/sr_cov"})
    EXPECT_EQ(a.count(name), 1u) << name;
  EXPECT_GE(a.size(), 1 + metrics::n_layer_metrics + models::n_theory + 4 + 4);
  for (const auto& [name, bytes] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs";
  }
  Store s = Store::open_read(path("b.h5"), plan);
  const auto again = s.read_results(ids);
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(again[i].platform, batch[i].platform) << ids[i];
}

TEST_F(StoreTest, ReadResultsOfAPendingTaskAndOfNoTask) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::last));
  Store s = Store::create(path("p.h5"), plan, prov(), false);
  const auto r = s.read_results(std::vector<std::uint64_t>{5});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].task, 5u);
  EXPECT_EQ(r[0].status, TaskStatus::pending);
  EXPECT_EQ(r[0].rank, -1);
  EXPECT_TRUE(std::isnan(r[0].wall_s));
  EXPECT_EQ(r[0].message, "");
  EXPECT_TRUE(r[0].platform.empty());
  ASSERT_EQ(r[0].layers.size(), static_cast<std::size_t>(plan.max_depth) + 1);
  for (const auto& row : r[0].layers)
    for (const double v : row) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(s.read_results(std::vector<std::uint64_t>{}).empty());
  EXPECT_EQ(store_error_of([&] {
              s.read_results(std::vector<std::uint64_t>{3, 16});
            }),
            "read_results: task 16 is not in the store");
}

TEST_F(StoreTest, NoteReusedAppendsOneLinePerCall) {
  const auto plan = plan::make_plan(make_spec(config::Spectra::none));
  {
    Store s = Store::create(path("r.h5"), plan, prov(), false);
    EXPECT_TRUE(store::read_info(path("r.h5")).reused.empty());
    s.note_reused("3 tasks from a.h5 (sweep 'x', plan hash 1)");
    s.note_reused("1 tasks from b.h5 (sweep 'y', plan hash 2)");
  }
  EXPECT_EQ(store::read_info(path("r.h5")).reused,
            (std::vector<std::string>{"3 tasks from a.h5 (sweep 'x', plan hash 1)",
                                      "1 tasks from b.h5 (sweep 'y', plan hash 2)"}));
  H5Id f(H5Fopen(path("r.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(read_str_attr(f.id, "reused"),
            "3 tasks from a.h5 (sweep 'x', plan hash 1)\n1 tasks from b.h5 (sweep 'y', plan hash 2)\n");
}

TEST(StoreNames, TaskStatusesAndTheHdf5Version) {
  EXPECT_STREQ(store::to_string(TaskStatus::pending), "pending");
  EXPECT_STREQ(store::to_string(TaskStatus::done), "done");
  EXPECT_STREQ(store::to_string(TaskStatus::failed), "failed");
  EXPECT_STREQ(store::to_string(TaskStatus::diverged), "diverged");
  EXPECT_STREQ(store::to_string(TaskStatus::not_needed), "not needed");
  EXPECT_STREQ(store::to_string(TaskStatus::vanished), "vanished");
  EXPECT_STREQ(store::to_string(static_cast<TaskStatus>(9)), "unknown");
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  EXPECT_EQ(store::hdf5_library_version(),
            std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release));
}

namespace {
/// Bytes HDF5 has allocated for dataset `name` of the store at `path`.
hsize_t storage_of(const fs::path& path, const char* name) {
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  H5Id d(H5Dopen2(f.id, name, H5P_DEFAULT));
  return H5Dget_storage_size(d.id);
}
}  // namespace

TEST_F(StoreTest, AStoreAllocatedByTaskTakesTheSpaceOfTheTasksWritten) {
  // A shard (tasks id = 0 mod 2) of a sweep without adaptive replicates: one task a chunk.
  const auto plan = plan::make_plan(make_spec(config::Spectra::last), {0, 2});
  const hsize_t row = (static_cast<hsize_t>(plan.max_depth) + 1) * sizeof(double);
  { Store s = Store::create(path("shard.h5"), plan, prov(), false); }
  EXPECT_EQ(storage_of(path("shard.h5"), "/layers/fro"), 0u);
  EXPECT_EQ(storage_of(path("shard.h5"), "/theory/C_M"), 0u);
  EXPECT_EQ(storage_of(path("shard.h5"), "/spectra/x_sv"), 0u);
  {
    Store s = Store::open_resume(path("shard.h5"), plan, prov());
    s.write(std::vector<TaskResult>{fake_result(plan, 0), fake_result(plan, 4)});
  }
  EXPECT_EQ(storage_of(path("shard.h5"), "/layers/fro"), 2 * row);
  EXPECT_EQ(storage_of(path("shard.h5"), "/theory/C_M"), 2 * sizeof(double));
  {
    Store s = Store::open_read(path("shard.h5"), plan);
    const auto r = s.read_results(std::vector<std::uint64_t>{0, 2});
    EXPECT_TRUE(same_bits(r[0].layers[1][0], fake_result(plan, 0).layers[1][0]));
    for (const auto& layer : r[1].layers)
      for (const double v : layer) EXPECT_TRUE(std::isnan(v));
  }
  {  // a task without values (an adaptive rule's not needed) takes no space
    Store s = Store::open_resume(path("shard.h5"), plan, prov());
    s.write(std::vector<TaskResult>{fake_result(plan, 2, TaskStatus::not_needed)});
  }
  EXPECT_EQ(storage_of(path("shard.h5"), "/layers/fro"), 2 * row);
  // the whole sweep, which runs every task, is allocated at creation
  const auto whole = plan::make_plan(make_spec(config::Spectra::last));
  { Store w = Store::create(path("whole.h5"), whole, prov(), false); }
  EXPECT_GE(storage_of(path("whole.h5"), "/layers/fro"), whole.tasks.size() * row);
}
