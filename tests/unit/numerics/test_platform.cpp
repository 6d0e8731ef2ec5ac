// What machine this process runs on (src/base/platform.cpp): cpu_model() as "<model name> (family
// F, model M)" of the first processor of /proc/cpuinfo, and address_space_limit() following
// RLIMIT_AS (set here to a large soft limit and restored).
#include <sys/resource.h>

#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "base/platform.hpp"

namespace rcsweep {
namespace {

/// The value of the first line of /proc/cpuinfo whose key (before the colon, blanks removed) is
/// `key`, within the first processor's block; nothing when there is none.
std::optional<std::string> cpuinfo_value(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line) && !line.empty();) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    const auto first = v.find_first_not_of(" \t");
    return first == std::string::npos ? std::string() : v.substr(first);
  }
  return std::nullopt;
}

TEST(Platform, CpuModelIsTheFirstProcessorsNameFamilyAndModel) {
  const auto name = cpuinfo_value("model name"), family = cpuinfo_value("cpu family"), model = cpuinfo_value("model");
  const std::string got = cpu_model();
  if (!name || name->empty()) {
    EXPECT_EQ(got, "unknown CPU");
    return;
  }
  if (family && model && !family->empty() && !model->empty())
    EXPECT_EQ(got, *name + " (family " + *family + ", model " + *model + ")");
  else
    EXPECT_EQ(got, *name);
  EXPECT_EQ(got.find('\n'), std::string::npos);
  EXPECT_EQ(cpu_model(), got);  // the same every time
}

TEST(Platform, AddressSpaceLimitFollowsRlimitAs) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  if (saved.rlim_cur == RLIM_INFINITY)
    EXPECT_FALSE(address_space_limit().has_value());
  else
    EXPECT_EQ(address_space_limit(), static_cast<double>(saved.rlim_cur));
  const rlim_t large = rlim_t{1} << 42;  // 4 TiB: far above what this process maps
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < large) GTEST_SKIP() << "hard RLIMIT_AS below 4 TiB";
  rlimit lowered = saved;
  lowered.rlim_cur = large;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &lowered), 0);
  const auto limit = address_space_limit();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);  // restored before any check can stop the test
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(*limit, 4398046511104.0);
}

}  // namespace
}  // namespace rcsweep
