// Machine facts: the memory limit of this process's control group (the job's memory under a batch
// system, a container's), read from a hierarchy laid out in a temporary folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/platform.hpp"

namespace rcsweep {
namespace {
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
