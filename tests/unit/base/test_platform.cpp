// What machine this process runs on (src/base/platform.cpp): cpu_model() as "<model name> (family
// F, model M)" of the first processor of /proc/cpuinfo, address_space_limit() following RLIMIT_AS
// (set here to a large soft limit and restored), and the memory limit of this process's control
// group (the job's memory under a batch system, a container's), read from a hierarchy laid out in a
// temporary folder.
#include <sys/resource.h>

#include <filesystem>
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

namespace fs = std::filesystem;

struct Hierarchy {
  fs::path root = fs::temp_directory_path() /
                  ("rcsweep_cgroup_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Hierarchy() { fs::remove_all(root); }
  ~Hierarchy() { fs::remove_all(root); }
  void write(const fs::path& relative, const std::string& text) const {
    fs::create_directories((root / relative).parent_path());
    std::ofstream(root / relative) << text;
  }
  std::optional<double> limit(const std::string& self_text) const {
    write("self", self_text);
    return cgroup_memory_limit(root / "fs", root / "self");
  }
};

TEST(Platform, CgroupV2MemoryLimitIsTheSmallestOnThePathToTheRoot) {
  const Hierarchy h;
  EXPECT_FALSE(h.limit("0::/slurm/job_7/step_0\n"));  // nothing readable: no limit
  h.write("fs/memory.max", "max\n");
  h.write("fs/slurm/job_7/memory.max", "4294967296\n");  // the job's --mem
  h.write("fs/slurm/job_7/step_0/memory.max", "max\n");
  EXPECT_EQ(h.limit("0::/slurm/job_7/step_0\n"), 4294967296.0);
  h.write("fs/slurm/memory.max", "1073741824\n");  // a tighter ancestor wins
  EXPECT_EQ(h.limit("0::/slurm/job_7/step_0\n"), 1073741824.0);
  EXPECT_FALSE(h.limit("0::/\n"));  // the root is unlimited
  h.write("fs/memory.max", "garbage\n");
  EXPECT_FALSE(h.limit("0::/\n"));
}

TEST(Platform, CgroupV1MemoryLimitIsReadFromTheMemoryController) {
  const Hierarchy h;
  h.write("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  h.write("fs/memory/process_api/abc/memory.limit_in_bytes", "9223372036854771712\n");
  const std::string self = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpuacct,cpu:/other\n0::/\n";
  EXPECT_FALSE(h.limit(self));
  h.write("fs/memory/process_api/abc/memory.limit_in_bytes", "25769803776\n");
  EXPECT_EQ(h.limit(self), 25769803776.0);
  EXPECT_EQ(h.limit("4:cpuset,memory:/process_api/abc\n"), 25769803776.0);  // memory among others
  EXPECT_FALSE(h.limit("4:cpu:/process_api/abc\n"));                        // not the memory controller
}

}  // namespace
}  // namespace rcsweep
