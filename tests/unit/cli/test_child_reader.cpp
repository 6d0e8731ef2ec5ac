// A store read in a child process (src/cli/child_reader.cpp): the child's exit code comes back; an
// exception in the child is said and is exit code 1; a crash or a read that does not end is
// reported instead of taking the program down.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "cli/cli_internal.hpp"

namespace rcsweep::cli {
namespace {

TEST(InChild, ReturnsTheExitCodeOfTheRead) {
  std::string crash;
  EXPECT_EQ(in_child([] { return 0; }, crash), 0);
  EXPECT_EQ(in_child([] { return 7; }, crash), 7);
  EXPECT_TRUE(crash.empty());
}

TEST(InChild, AnExceptionIsExitCodeOne) {
  std::string crash;
  EXPECT_EQ(in_child([]() -> int { throw std::runtime_error("bad store"); }, crash), 1);
  EXPECT_TRUE(crash.empty());
}

TEST(InChild, TheChildsChangesStayInIt) {
  int value = 1;
  std::string crash;
  EXPECT_EQ(in_child(
                [&] {
                  value = 2;
                  return 0;
                },
                crash),
            0);
  EXPECT_EQ(value, 1);
}

TEST(InChild, ACrashIsReportedWithItsSignal) {
  std::string crash;
  EXPECT_EQ(in_child(
                [] {
                  std::raise(SIGSEGV);
                  return 0;
                },
                crash),
            std::nullopt);
  EXPECT_EQ(crash.rfind("reading it crashed the HDF5 library: ", 0), 0u) << crash;
  EXPECT_EQ(crashed_message("s.h5", crash), "s.h5: damaged HDF5 file (" + crash + ")");
}

TEST(InChild, AReadThatDoesNotEndIsStoppedAfterTheTimeout) {
  ::setenv("RCSWEEP_STORE_READ_TIMEOUT", "1", 1);
  std::string crash;
  EXPECT_EQ(in_child(
                [] {
                  for (;;) pause();
                  return 0;
                },
                crash),
            std::nullopt);
  ::unsetenv("RCSWEEP_STORE_READ_TIMEOUT");
  EXPECT_EQ(crash, "reading it did not finish within 1 s");
}

}  // namespace
}  // namespace rcsweep::cli
