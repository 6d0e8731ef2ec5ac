// This machine's rates (plan/calibration.hpp): where they are kept, a stored file read back only on
// the machine that measured it, and a measurement that fills every table the cost model reads.
#include "plan/calibration.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace rcsweep::plan {
namespace {

/// Sets an environment variable for the scope of a test, or unsets it (nullptr); restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// A folder of this test's own (ctest may run this program's tests at the same time), removed after.
class CalibrationFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("rcsweep-test-calibration-") + test->name() + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

Calibration this_machines() {
  Calibration c = default_calibration();
  c.machine = machine_id();
  c.normal_rate = 1.25e8;  // not the default: read back, not made up
  return c;
}

TEST(CalibrationPath, EnvironmentVariableThenXdgCacheThenHome) {
  const ScopedEnv home("HOME", "/h");
  {
    const ScopedEnv file("RCSWEEP_CALIBRATION", "/x/rates.toml");
    const ScopedEnv cache("XDG_CACHE_HOME", "/c");
    EXPECT_EQ(calibration_path(), "/x/rates.toml");
  }
  {
    const ScopedEnv file("RCSWEEP_CALIBRATION", "");  // empty: not set
    const ScopedEnv cache("XDG_CACHE_HOME", "/c");
    EXPECT_EQ(calibration_path(), "/c/rcsweep/calibration.toml");
  }
  const ScopedEnv file("RCSWEEP_CALIBRATION", nullptr);
  const ScopedEnv cache("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(calibration_path(), "/h/.cache/rcsweep/calibration.toml");
  const ScopedEnv no_home("HOME", nullptr);
  EXPECT_EQ(calibration_path(), std::filesystem::temp_directory_path() / "rcsweep" / "calibration.toml");
}

TEST(MachineId, NamesTheCoresAndIsStable) {
  const std::string id = machine_id();
  EXPECT_NE(id.find(" cores, "), std::string::npos) << id;
  EXPECT_EQ(id, machine_id());
}

TEST_F(CalibrationFile, SavedFileLoadsBackInItsNewFolder) {
  const auto path = dir_ / "a" / "b" / "calibration.toml";
  const Calibration c = this_machines();
  ASSERT_TRUE(save_calibration(c, path));
  const auto back = load_calibration(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->machine, c.machine);
  EXPECT_EQ(back->gemm_rate, c.gemm_rate);
  EXPECT_EQ(back->mixer_s, c.mixer_s);
  EXPECT_EQ(back->normal_rate, 1.25e8);
  EXPECT_EQ(back->conv_rate, c.conv_rate);
}

TEST_F(CalibrationFile, MissingDamagedOrAnotherMachinesFileIsNotUsed) {
  EXPECT_FALSE(load_calibration(dir_ / "missing.toml").has_value());
  Calibration other = this_machines();
  other.machine = "another CPU, 1 cores, another BLAS";
  ASSERT_TRUE(save_calibration(other, dir_ / "other.toml"));
  EXPECT_FALSE(load_calibration(dir_ / "other.toml").has_value());
  std::ofstream(dir_ / "damaged.toml") << "machine = \"" << machine_id() << "\"\ngemm_rate = [[16, \n";
  EXPECT_FALSE(load_calibration(dir_ / "damaged.toml").has_value());
}

TEST_F(CalibrationFile, UnwritablePlaceIsReported) {
  ASSERT_TRUE(std::filesystem::create_directories(dir_));
  std::ofstream(dir_ / "file") << "x";
  EXPECT_FALSE(save_calibration(this_machines(), dir_ / "file" / "calibration.toml"));  // a file as its folder
  EXPECT_FALSE(save_calibration(this_machines(), dir_));                                // a folder as the file
}

TEST(MeasureCalibration, FillsEveryTableWithPositiveRatesOfThisMachine) {
  const Calibration c = measure_calibration();
  EXPECT_EQ(c.machine, machine_id());
  ASSERT_EQ(c.gemm_rate.size(), 7u);
  EXPECT_EQ(c.gemm_rate.front().first, 16.0);
  EXPECT_EQ(c.gemm_rate.back().first, 1024.0);
  ASSERT_EQ(c.signal_s.size(), 5u);
  ASSERT_EQ(c.svd_s.size(), 5u);
  ASSERT_EQ(c.mixer_s.size(), 6u);  // and one mixer beyond the last-level cache
  EXPECT_EQ(c.mixer_s.back().first, 2048.0);
  for (const auto* table : {&c.gemm_rate, &c.signal_s, &c.mixer_s, &c.svd_s})
    for (std::size_t i = 0; i < table->size(); ++i) {
      EXPECT_GT((*table)[i].second, 0.0) << i;
      if (i > 0) {
        EXPECT_GT((*table)[i].first, (*table)[i - 1].first) << i;  // increasing sizes (interpolate)
      }
    }
  for (const double rate : {c.normal_rate, c.exp_rate, c.pass_rate, c.conv_rate}) {
    EXPECT_GT(rate, 0.0);
    EXPECT_LT(rate, 1e15);
  }
  // the BLIS range is empty or a proper interval of m n k
  EXPECT_EQ(c.blis_plain_ratio.size(), c.blis_transposed_ratio.size());  // 11 sizes, or none without BLIS
  EXPECT_TRUE(c.blis_plain_ratio.empty() || c.blis_plain_ratio.size() == 11u);
  for (const auto& [above, up_to] : {c.blis_plain, c.blis_transposed}) {
    EXPECT_GE(above, 0.0);
    EXPECT_TRUE(up_to == 0.0 || up_to > above);
  }
  // what the cost model reads back is what was measured
  const Calibration back = parse_calibration(to_toml(c));
  EXPECT_EQ(back.gemm_rate.size(), c.gemm_rate.size());
  EXPECT_EQ(back.machine, c.machine);
}

}  // namespace
}  // namespace rcsweep::plan
