// sweep::parse_duration: rcsweep's own forms and Slurm's time formats, read as Slurm reads them
// (sbatch --time: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S").
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::sweep {
namespace {

double seconds(const std::string& text) { return parse_duration(text, "--time-limit"); }

TEST(ParseDuration, UnitsOfItsOwn) {
  EXPECT_DOUBLE_EQ(seconds("90s"), 90.0);
  EXPECT_DOUBLE_EQ(seconds("15m"), 900.0);
  EXPECT_DOUBLE_EQ(seconds("2h"), 7200.0);
  EXPECT_DOUBLE_EQ(seconds("1d"), 86400.0);
  EXPECT_DOUBLE_EQ(seconds("1h30m"), 5400.0);
  EXPECT_DOUBLE_EQ(seconds("2.5h"), 9000.0);
}

TEST(ParseDuration, SlurmFormatsAsSlurmReadsThem) {
  EXPECT_DOUBLE_EQ(seconds("5"), 300.0);   // minutes
  EXPECT_DOUBLE_EQ(seconds("0:05"), 5.0);  // minutes:seconds
  EXPECT_DOUBLE_EQ(seconds("90:00"), 5400.0);
  EXPECT_DOUBLE_EQ(seconds("1:02:03"), 3723.0);                // hours:minutes:seconds
  EXPECT_DOUBLE_EQ(seconds("2-3"), 2 * 86400.0 + 3 * 3600.0);  // days-hours
  EXPECT_DOUBLE_EQ(seconds("2-3:04"), 2 * 86400.0 + 3 * 3600.0 + 4 * 60.0);
  EXPECT_DOUBLE_EQ(seconds("2-03:04:05"), 2 * 86400.0 + 3 * 3600.0 + 4 * 60.0 + 5.0);
  EXPECT_DOUBLE_EQ(seconds("0-0:0:1"), 1.0);
}

TEST(ParseDuration, MalformedOrEmptyNamesTheOption) {
  for (const char* bad : {"", "5x", "-3m", "0", "0:00", "1h30", "::", "12:99", "1:60:00", "1-24", "1-2:3:4:5", "a-1",
                          "1:2:3:4", "1-", "-1"}) {
    try {
      seconds(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--time-limit"), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace rcsweep::sweep
