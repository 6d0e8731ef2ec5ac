// /provenance (src/store/platforms.cpp): which platform computed each task, through the store
// (recorded per task, read back with the results, counted among finished tasks, added on resume to
// a store made before it) and through detail::PlatformColumn itself.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "config/params.hpp"
#include "plan/plan.hpp"
#include "store/platforms.hpp"
#include "store/store.hpp"
#include "store_test_support.hpp"

using namespace rcsweep;
using store::Store;
using store::TaskResult;
using store::TaskStatus;
using test::fake_result;
using test::H5Id;
using test::make_spec;
using test::prov;
using test::read_dataset;
using test::read_str_attr;
using test::store_error_of;
using test::StoreTest;

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

// ---- detail::PlatformColumn on its own --------------------------------------------------------

namespace {

using store::Platform;
using store::detail::PlatformColumn;

const Platform zen{"OpenBLAS 0.3.21 Zen", "AMD EPYC (family 25, model 1)", "node1"};
const Platform haswell{"OpenBLAS 0.3.21 Haswell", "Intel Xeon (family 6, model 85)", "node2"};

/// A fresh HDF5 file for a column, written and read with the column alone.
class PlatformColumnTest : public test::StoreDirTest {
 protected:
  H5Id new_file(const std::string& name) {
    return H5Id(H5Fcreate(path(name).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  }
};

/// The column's index of every task, read with the plain HDF5 C API.
std::vector<std::int16_t> indices(hid_t file) {
  return test::read_dataset<std::int16_t>(file, "/provenance/platform", H5T_NATIVE_INT16);
}

}  // namespace

TEST_F(PlatformColumnTest, CreatedColumnIsAllNotRecordedWithAnEmptyTable) {
  H5Id f = new_file("c.h5");
  const PlatformColumn c = PlatformColumn::create(f.id, 5);
  EXPECT_TRUE(c.exists());
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>(5, -1)));
  EXPECT_EQ(c.read_all(), std::vector<Platform>(5));
  EXPECT_EQ(c.count(std::vector<bool>(5, true)), (std::vector<std::pair<Platform, std::uint64_t>>{{Platform{}, 5}}));
  EXPECT_TRUE(c.count(std::vector<bool>(5, false)).empty());
  H5Id g(H5Gopen2(f.id, "/provenance", H5P_DEFAULT));
  EXPECT_EQ(read_str_attr(g.id, "blas_kernels"), "");
  EXPECT_EQ(read_str_attr(g.id, "cpus"), "");
  EXPECT_EQ(read_str_attr(g.id, "hosts"), "");
  EXPECT_NE(read_str_attr(g.id, "description"), "<missing>");
}

TEST_F(PlatformColumnTest, WriteAppendsNewPlatformsAndIndexesEveryRow) {
  H5Id f = new_file("c.h5");
  PlatformColumn c = PlatformColumn::create(f.id, 6);
  const Platform none;
  // rows 0, 1 and 3, 4 in run order: zen, haswell, (not recorded), zen
  c.write({{0, 2}, {3, 2}}, {&zen, &haswell, &none, &zen});
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{0, 1, -1, -1, 0, -1}));
  EXPECT_EQ(c.read_all(), (std::vector<Platform>{zen, haswell, {}, {}, zen, {}}));
  H5Id g(H5Gopen2(f.id, "/provenance", H5P_DEFAULT));
  EXPECT_EQ(read_str_attr(g.id, "blas_kernels"), zen.blas_kernel + "\n" + haswell.blas_kernel);
  EXPECT_EQ(read_str_attr(g.id, "cpus"), zen.cpu + "\n" + haswell.cpu);
  EXPECT_EQ(read_str_attr(g.id, "hosts"), zen.host + "\n" + haswell.host);
  // A known platform adds nothing to the table; an empty one writes -1 over a recorded row.
  c.write({{1, 1}, {5, 1}}, {&none, &haswell});
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{0, -1, -1, -1, 0, 1}));
  EXPECT_EQ(read_str_attr(g.id, "blas_kernels"), zen.blas_kernel + "\n" + haswell.blas_kernel);
}

TEST_F(PlatformColumnTest, CountKeepsTableOrderLeavesOutUncountedAndPutsNotRecordedLast) {
  H5Id f = new_file("c.h5");
  PlatformColumn c = PlatformColumn::create(f.id, 6);
  const Platform none;
  c.write({{0, 6}}, {&haswell, &none, &zen, &haswell, &zen, &zen});  // table: haswell, zen
  using Counts = std::vector<std::pair<Platform, std::uint64_t>>;
  EXPECT_EQ(c.count(std::vector<bool>(6, true)), (Counts{{haswell, 2}, {zen, 3}, {Platform{}, 1}}));
  EXPECT_EQ(c.count({false, true, true, false, true, false}), (Counts{{zen, 2}, {Platform{}, 1}}));
  EXPECT_EQ(c.count({true, false, false, true, false, false}), (Counts{{haswell, 2}}));
  // a shorter `counted` counts only the tasks it covers
  EXPECT_EQ(c.count({true, true}), (Counts{{haswell, 1}, {Platform{}, 1}}));
  EXPECT_TRUE(c.count({}).empty());
}

TEST_F(PlatformColumnTest, NewlinesInNamesBecomeSpaces) {
  H5Id f = new_file("c.h5");
  PlatformColumn c = PlatformColumn::create(f.id, 2);
  const Platform odd{"OpenBLAS\n0.3.21", "a\nb\nc", "host\n"};
  c.write({{0, 2}}, {&odd, &zen});
  const Platform clean{"OpenBLAS 0.3.21", "a b c", "host "};
  EXPECT_EQ(c.read_all(), (std::vector<Platform>{clean, zen}));
  const PlatformColumn again = PlatformColumn::open(f.id, 2);  // every line still one platform
  EXPECT_EQ(again.read_all(), (std::vector<Platform>{clean, zen}));
  // the cleaned platform is the same entry as the raw one
  c.write({{1, 1}}, {&odd});
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{0, 0}));
}

TEST_F(PlatformColumnTest, OpenReadsTheTableBackAndAppendsAfterIt) {
  H5Id f = new_file("c.h5");
  {
    PlatformColumn c = PlatformColumn::create(f.id, 4);
    c.write({{2, 1}}, {&zen});
  }
  PlatformColumn c = PlatformColumn::open(f.id, 4);
  ASSERT_TRUE(c.exists());
  EXPECT_EQ(c.read_all(), (std::vector<Platform>{{}, {}, zen, {}}));
  c.write({{0, 1}}, {&haswell});
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{1, -1, 0, -1}));
  EXPECT_EQ(PlatformColumn::open(f.id, 4).read_all(), (std::vector<Platform>{haswell, {}, zen, {}}));
}

TEST_F(PlatformColumnTest, FileWithoutProvenanceHasNoColumnAndWritesNothing) {
  H5Id f = new_file("c.h5");
  PlatformColumn c = PlatformColumn::open(f.id, 3);
  EXPECT_FALSE(c.exists());
  EXPECT_EQ(c.read_all(), std::vector<Platform>(3));
  EXPECT_EQ(c.count({true, false, true}), (std::vector<std::pair<Platform, std::uint64_t>>{{Platform{}, 2}}));
  c.write({{0, 1}}, {&zen});  // nothing to write to
  EXPECT_EQ(H5Lexists(f.id, "provenance", H5P_DEFAULT), 0);
  // a group without the column is no column either
  H5Id g(H5Gcreate2(f.id, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  EXPECT_FALSE(PlatformColumn::open(f.id, 3).exists());
}

TEST_F(PlatformColumnTest, ZeroTasks) {
  H5Id f = new_file("c.h5");
  const PlatformColumn c = PlatformColumn::create(f.id, 0);
  EXPECT_TRUE(c.read_all().empty());
  EXPECT_TRUE(c.count({}).empty());
  EXPECT_TRUE(PlatformColumn::open(f.id, 0).read_all().empty());
}

TEST_F(PlatformColumnTest, IndexOutsideTheTableReadsAsNotRecorded) {
  H5Id f = new_file("c.h5");
  {
    PlatformColumn c = PlatformColumn::create(f.id, 3);
    c.write({{0, 1}}, {&zen});
  }
  {
    H5Id d(H5Dopen2(f.id, "/provenance/platform", H5P_DEFAULT));
    const std::vector<std::int16_t> v = {0, 7, -5};
    ASSERT_GE(H5Dwrite(d.id, H5T_NATIVE_INT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  }
  const PlatformColumn c = PlatformColumn::open(f.id, 3);
  EXPECT_EQ(c.read_all(), (std::vector<Platform>{zen, {}, {}}));
  EXPECT_EQ(c.count({true, true, true}), (std::vector<std::pair<Platform, std::uint64_t>>{{zen, 1}, {Platform{}, 2}}));
}

TEST_F(PlatformColumnTest, OpenRefusesAColumnOfAnotherLength) {
  H5Id f = new_file("c.h5");
  { PlatformColumn::create(f.id, 4); }
  EXPECT_EQ(store_error_of([&] { PlatformColumn::open(f.id, 5); }),
            "/provenance/platform does not have one entry per task");
  EXPECT_EQ(store_error_of([&] { PlatformColumn::open(f.id, 3); }),
            "/provenance/platform does not have one entry per task");
}

TEST_F(PlatformColumnTest, OpenRefusesTablesOfDifferentLengths) {
  H5Id f = new_file("c.h5");
  {
    PlatformColumn c = PlatformColumn::create(f.id, 2);
    c.write({{0, 2}}, {&zen, &haswell});
  }
  H5Id g(H5Gopen2(f.id, "/provenance", H5P_DEFAULT));
  const auto set = [&](const char* name, const std::string& value) {
    H5Adelete(g.id, name);
    H5Id t(H5Tcopy(H5T_C_S1));
    H5Tset_size(t.id, H5T_VARIABLE);
    H5Tset_cset(t.id, H5T_CSET_UTF8);
    H5Id sp(H5Screate(H5S_SCALAR));
    H5Id a(H5Acreate2(g.id, name, t.id, sp.id, H5P_DEFAULT, H5P_DEFAULT));
    const char* p = value.c_str();
    ASSERT_GE(H5Awrite(a.id, t.id, &p), 0);
  };
  set("cpus", zen.cpu);
  EXPECT_EQ(store_error_of([&] { PlatformColumn::open(f.id, 2); }),
            "/provenance: blas_kernels and cpus list different numbers of platforms");
  set("cpus", zen.cpu + "\n" + haswell.cpu);
  set("hosts", "a\nb\nc");
  EXPECT_EQ(store_error_of([&] { PlatformColumn::open(f.id, 2); }),
            "/provenance: blas_kernels and hosts list different numbers of platforms");
  // an empty hosts attribute (a store whose only host was unnamed) reads as empty hosts
  set("hosts", "");
  EXPECT_EQ(PlatformColumn::open(f.id, 2).read_all(),
            (std::vector<Platform>{{zen.blas_kernel, zen.cpu, ""}, {haswell.blas_kernel, haswell.cpu, ""}}));
}

TEST_F(PlatformColumnTest, MoreThan32767PlatformsAreRefused) {
  H5Id f = new_file("c.h5");
  { PlatformColumn::create(f.id, 1); }
  {
    std::string lines;
    for (int i = 0; i < 32767; ++i) lines += (i ? "\n" : "") + std::to_string(i);
    H5Id g(H5Gopen2(f.id, "/provenance", H5P_DEFAULT));
    for (const char* name : {"blas_kernels", "cpus", "hosts"}) {
      H5Adelete(g.id, name);
      H5Id t(H5Tcopy(H5T_C_S1));
      H5Tset_size(t.id, H5T_VARIABLE);
      H5Id sp(H5Screate(H5S_SCALAR));
      H5Id a(H5Acreate2(g.id, name, t.id, sp.id, H5P_DEFAULT, H5P_DEFAULT));
      const char* p = lines.c_str();
      ASSERT_GE(H5Awrite(a.id, t.id, &p), 0);
    }
  }
  PlatformColumn c = PlatformColumn::open(f.id, 1);
  const Platform known{"32766", "32766", "32766"};
  c.write({{0, 1}}, {&known});  // the last entry of a full table
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{32766}));
  EXPECT_EQ(store_error_of([&] { c.write({{0, 1}}, {&zen}); }), "/provenance: more than 32767 platforms");
  EXPECT_EQ(indices(f.id), (std::vector<std::int16_t>{32766}));  // nothing written
}

// A platform with some fields empty (but not all) is recorded; a table of one such platform is
// written with an empty `blas_kernels` (or `cpus`) attribute, which must read back as one empty
// line, not as no platform (else the store it was just written to is refused).
TEST_F(PlatformColumnTest, PlatformWithAnEmptyFieldReadsBack) {
  H5Id f = new_file("c.h5");
  const Platform no_kernel{"", "some CPU", "node1"};
  {
    PlatformColumn c = PlatformColumn::create(f.id, 2);
    c.write({{0, 1}}, {&no_kernel});
  }
  std::vector<Platform> back;
  EXPECT_EQ(store_error_of([&] { back = PlatformColumn::open(f.id, 2).read_all(); }), "NO EXCEPTION");
  EXPECT_EQ(back, (std::vector<Platform>{no_kernel, {}}));
}
