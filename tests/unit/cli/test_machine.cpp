// What the commands know of this machine (src/cli/machine.cpp): its memory, no more than the
// physical memory nor than its control group's limit, and the BLAS threads OpenBLAS started,
// read without changing them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "base/platform.hpp"
#include "cli/cli_internal.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::cli {
namespace {

TEST(PhysicalMemory, AtMostThePhysicalPagesAndTheControlGroupsLimit) {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  const double bytes = physical_memory_bytes();
  EXPECT_GT(bytes, 0.0);
  EXPECT_LE(bytes, physical);
  if (const auto limit = cgroup_memory_limit()) {
    EXPECT_EQ(bytes, std::min(physical, *limit));
  } else {
    EXPECT_EQ(bytes, physical);
  }
}

TEST(BlasLoadThreads, ReadsTheCountWithoutChangingIt) {
  const int now = blas_load_threads();
  EXPECT_GE(now, 1);
  EXPECT_EQ(blas_load_threads(), now);  // reading it left it as it was
  const int before = linalg::set_blas_threads(1);
  EXPECT_EQ(before, now);
  EXPECT_EQ(blas_load_threads(), 1);
  linalg::set_blas_threads(before);
}

}  // namespace
}  // namespace rcsweep::cli
