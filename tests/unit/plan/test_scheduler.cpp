// The cores per node a batch scheduler reports (plan/scheduler.hpp): sinfo's and pbsnodes' output
// read, and the commands run from PATH, with a partition quoted for the shell.
#include "plan/scheduler.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace rcsweep::plan {
namespace {

TEST(MostCoresPerNode, SinfoLinesAndTheirPlusSign) {
  EXPECT_EQ(most_cores_per_node(Scheduler::slurm, "64\n"), 64);
  EXPECT_EQ(most_cores_per_node(Scheduler::slurm, "32+\n128\n48"), 128);  // no final line break
  EXPECT_EQ(most_cores_per_node(Scheduler::slurm, ""), 0);
  EXPECT_EQ(most_cores_per_node(Scheduler::slurm, "sinfo: error: no partition\n"), 0);
}

TEST(MostCoresPerNode, PbsnodesReadsOnlyNcpus) {
  const std::string report =
      "node01\n     state = free\n     resources_available.ncpus = 36\n     resources_available.mem = 192gb\n"
      "     pcpus = 96\n\nnode02\n     resources_available.ncpus = 72\n     resources_assigned.ncpus = 100\n";
  EXPECT_EQ(most_cores_per_node(Scheduler::pbs, report), 72);
  EXPECT_EQ(most_cores_per_node(Scheduler::pbs, "64\n"), 0);  // a bare number is not PBS's
  EXPECT_EQ(most_cores_per_node(Scheduler::slurm, "     resources_available.ncpus = 36\n"), 0);
}

/// A folder on PATH with fake sinfo and pbsnodes that write their arguments beside them.
class FakeScheduler : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("rcsweep-test-scheduler-") + test->name() + "-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    if (const char* p = std::getenv("PATH")) path_ = p;
    ::setenv("PATH", (dir_.string() + ":" + path_.value_or("/usr/bin:/bin")).c_str(), 1);
  }
  void TearDown() override {
    if (path_)
      ::setenv("PATH", path_->c_str(), 1);
    else
      ::unsetenv("PATH");
    std::filesystem::remove_all(dir_);
  }
  /// A command `name` that records its arguments in name.args and prints `output`.
  void fake(const std::string& name, const std::string& output) {
    const auto file = dir_ / name;
    std::ofstream(file) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" << (dir_ / (name + ".args")).string() << "'\nprintf '"
                        << output << "'\n";
    ::chmod(file.c_str(), 0755);
  }
  std::string arguments(const std::string& name) const {
    std::ifstream in(dir_ / (name + ".args"));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::filesystem::path dir_;
  std::optional<std::string> path_;
};

TEST_F(FakeScheduler, SinfoOfThePartition) {
  fake("sinfo", "32+\\n64\\n");
  EXPECT_EQ(scheduler_cores_per_node(Scheduler::slurm, ""), 64);
  EXPECT_EQ(arguments("sinfo"), "-h\n-o\n%c\n");
  EXPECT_EQ(scheduler_cores_per_node(Scheduler::slurm, "big nodes; x"), 64);
  EXPECT_EQ(arguments("sinfo"), "-h\n-o\n%c\n-p\nbig nodes; x\n");  // one word, nothing run by the shell
}

TEST_F(FakeScheduler, Pbsnodes) {
  fake("pbsnodes", "n1\\n  resources_available.ncpus = 24\\n");
  EXPECT_EQ(scheduler_cores_per_node(Scheduler::pbs, "ignored"), 24);
  EXPECT_EQ(arguments("pbsnodes"), "-a\n");
}

TEST_F(FakeScheduler, SilentOrMissingCommandIsZero) {
  fake("sinfo", "");
  EXPECT_EQ(scheduler_cores_per_node(Scheduler::slurm, ""), 0);
  std::filesystem::remove(dir_ / "sinfo");
  ::setenv("PATH", (dir_.string() + ":/usr/bin:/bin").c_str(), 1);  // timeout found, no fake scheduler
  if (std::filesystem::exists("/usr/bin/sinfo") || std::filesystem::exists("/bin/sinfo"))
    GTEST_SKIP() << "Slurm is installed here";
  EXPECT_EQ(scheduler_cores_per_node(Scheduler::slurm, ""), 0);
}

}  // namespace
}  // namespace rcsweep::plan
