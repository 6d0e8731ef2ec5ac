// Quantities in messages (src/base/units.hpp): bytes with a binary unit and seconds in s, min or h,
// one decimal, at and around every unit boundary.
#include <string>

#include <gtest/gtest.h>

#include "base/units.hpp"

namespace rcsweep {
namespace {

TEST(Units, BytesTakeTheLargestBinaryUnitBelowTheValue) {
  EXPECT_EQ(human_bytes(0), "0.0 B");
  EXPECT_EQ(human_bytes(1023), "1023.0 B");
  EXPECT_EQ(human_bytes(1024), "1.0 KiB");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(40.0 * 1024 * 1024), "40.0 MiB");
  EXPECT_EQ(human_bytes(634.4 * 1024 * 1024), "634.4 MiB");
  EXPECT_EQ(human_bytes(1024.0 * 1024 * 1024 - 1), "1024.0 MiB");  // rounded, not promoted
  EXPECT_EQ(human_bytes(2.25 * 1024 * 1024 * 1024), "2.2 GiB");    // printf rounds half to even
  EXPECT_EQ(human_bytes(3.0 * 1024 * 1024 * 1024 * 1024), "3.0 TiB");
  EXPECT_EQ(human_bytes(5000.0 * 1024 * 1024 * 1024 * 1024), "5000.0 TiB");  // no unit above TiB
}

TEST(Units, SecondsMinutesOrHours) {
  EXPECT_EQ(human_seconds(0), "0.0 s");
  EXPECT_EQ(human_seconds(0.04), "0.0 s");
  EXPECT_EQ(human_seconds(59.96), "60.0 s");
  EXPECT_EQ(human_seconds(119.9), "119.9 s");
  EXPECT_EQ(human_seconds(120), "2.0 min");
  EXPECT_EQ(human_seconds(228), "3.8 min");
  EXPECT_EQ(human_seconds(7199), "120.0 min");
  EXPECT_EQ(human_seconds(7200), "2.0 h");
  EXPECT_EQ(human_seconds(90000), "25.0 h");
}

}  // namespace
}  // namespace rcsweep
