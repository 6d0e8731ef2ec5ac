// sweep/provenance: the time and platform texts, and when a run's BLAS kernels are noted as
// different among its ranks or from the store's finished tasks.
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.hpp"
#include "sweep/provenance.hpp"

using namespace rcsweep;
using store::Platform;

namespace {

TEST(Provenance, UtcNowIsIso8601) {
  EXPECT_TRUE(std::regex_match(sweep::utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << sweep::utc_now();
}

TEST(Provenance, PlatformTextRoundTrips) {
  const Platform p = sweep::parse_platform(sweep::platform_text());
  EXPECT_FALSE(p.blas_kernel.empty());
  EXPECT_EQ(p.host, sweep::hostname());
  EXPECT_EQ(sweep::parse_platform("OpenBLAS 0.3.21 Haswell\nAMD EPYC (family 25, model 17)\nnode017"),
            (Platform{"OpenBLAS 0.3.21 Haswell", "AMD EPYC (family 25, model 17)", "node017"}));
}

TEST(CompareKernels, OneKernelAsStoredIsNotNoted) {
  const std::vector<Platform> ranks{{"K1", "cpu", "a"}, {"K1", "cpu", "b"}};
  const auto c = sweep::compare_kernels(ranks, {{{"K1", "cpu", "a"}, 5}});
  EXPECT_FALSE(c.mixed || c.new_kernel);
  EXPECT_EQ(c.kernels, "K1");
  EXPECT_EQ(c.stored, "K1 (5 tasks)");
  EXPECT_FALSE(sweep::compare_kernels(ranks, {}).new_kernel);  // nothing stored yet
}

TEST(CompareKernels, MixedRanks) {
  const auto c = sweep::compare_kernels({{"K1", "x", "a"}, {"K2", "y", "b"}, {"K1", "x", "c"}}, {});
  EXPECT_TRUE(c.mixed);
  EXPECT_FALSE(c.new_kernel);
  EXPECT_EQ(c.kernels, "K1, K2");
}

TEST(CompareKernels, AKernelNoStoredTaskWasComputedWith) {
  const std::vector<std::pair<Platform, std::uint64_t>> stored{
      {{}, 3}, {{"K1", "x", "a"}, 4}, {{"K1", "x", "b"}, 2}, {{"K2", "y", "c"}, 1}};
  const auto c = sweep::compare_kernels({{"K3", "z", "a"}}, stored);
  EXPECT_TRUE(c.new_kernel);
  EXPECT_FALSE(c.mixed);
  EXPECT_EQ(c.stored, "K1 (4 tasks), K1 (2 tasks), K2 (1 tasks)");  // unrecorded platforms left out
  EXPECT_FALSE(sweep::compare_kernels({{"K2", "z", "a"}}, stored).new_kernel);
  EXPECT_FALSE(sweep::compare_kernels({{"K1", "z", "a"}}, {{{}, 9}}).new_kernel);  // nothing recorded
}

}  // namespace
