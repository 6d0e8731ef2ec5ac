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
