// Reading a sweep file (config/sweep_file.cpp): regular files and links to them are read; FIFOs,
// devices, directories, link loops, long names and files over the limit are refused without
// blocking, each a ConfigError naming the path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::good;

/// The single problem read_sweep_file() reports for `path`.
std::string read_problem(const std::filesystem::path& path) {
  try {
    read_sweep_file(path);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    EXPECT_EQ(e.issues()[0].key, "");
    return e.issues()[0].problem;
  }
  ADD_FAILURE() << "no ConfigError for " << path;
  return "";
}

class SweepFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rcsweep_hostile_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

TEST_F(SweepFile, RegularFileAndSymlinkToItAreRead) {
  const auto path = write("ok.toml", good);
  EXPECT_EQ(read_sweep_file(path), good);
  std::filesystem::create_symlink(path, dir_ / "link.toml");
  EXPECT_EQ(load_sweep(dir_ / "link.toml").name, "ok");
  EXPECT_EQ(sweep_file_problem(dir_ / "link.toml"), "");
}

TEST_F(SweepFile, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "pipe.toml").c_str(), 0600), 0);
  const std::string p = read_problem(dir_ / "pipe.toml");
  EXPECT_NE(p.find("'" + (dir_ / "pipe.toml").string() + "'"), std::string::npos) << p;
  EXPECT_NE(p.find("it is a FIFO (named pipe), not a regular file"), std::string::npos) << p;
  std::filesystem::create_symlink(dir_ / "pipe.toml", dir_ / "to_pipe.toml");
  EXPECT_NE(read_problem(dir_ / "to_pipe.toml").find("FIFO"), std::string::npos);
}

TEST_F(SweepFile, DevicesDirectoriesLoopsAndLongNamesAreRefused) {
  EXPECT_NE(read_problem("/dev/zero").find("'/dev/zero': it is a character device, not a regular file"),
            std::string::npos);
  EXPECT_NE(read_problem(dir_).find("it is a directory"), std::string::npos);
  std::filesystem::create_symlink(dir_ / "b", dir_ / "a");
  std::filesystem::create_symlink(dir_ / "a", dir_ / "b");
  EXPECT_NE(read_problem(dir_ / "a").find("too many levels of symbolic links"), std::string::npos);
  EXPECT_NE(read_problem(dir_ / std::string(300, 'x')).find("the name is too long"), std::string::npos);
  EXPECT_NE(read_problem(dir_ / "missing.toml").find("missing.toml': no such file"), std::string::npos);
}

TEST_F(SweepFile, LargerThanTheLimitIsRefusedBeforeReading) {
  const auto path = dir_ / "huge.toml";
  {
    std::ofstream out(path, std::ios::binary);
    out << good;
  }
  std::filesystem::resize_file(path, max_sweep_file_bytes + 1);  // sparse: nothing written
  const std::string p = read_problem(path);
  EXPECT_NE(p.find("it has 16777217 bytes, more than the 16 MiB (16777216 bytes) a sweep file may have"),
            std::string::npos)
      << p;
  EXPECT_EQ(sweep_file_problem(path), p.substr(p.find("': ") + 3));
  std::filesystem::resize_file(path, max_sweep_file_bytes);  // at the limit: read (and then not TOML)
  EXPECT_EQ(read_sweep_file(path).size(), max_sweep_file_bytes);
}

TEST(SweepSpec, LoadSweepReadsAFileAndReportsMissingOnes) {
  const auto dir = std::filesystem::temp_directory_path() / "rcsweep_test_config";
  std::filesystem::create_directories(dir);
  const auto path = dir / "sweep.toml";
  {
    std::ofstream out(path);
    out << good;
  }
  EXPECT_EQ(load_sweep(path).plan_hash(), parse_sweep(good).plan_hash());
  try {
    load_sweep(dir / "missing.toml");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].key, "");
    EXPECT_NE(e.issues()[0].problem.find("missing.toml"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_sweep(dir), ConfigError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rcsweep::config
