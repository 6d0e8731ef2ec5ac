// The exception hierarchy (src/base/error.cpp): where an error was thrown, the one-line-per-issue
// text of ConfigError, LinalgError's routine and info, and the out-of-memory message.
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace rcsweep {
namespace {

TEST(Error, CarriesTheFileAndLineItWasThrownAt) {
  const int line = __LINE__ + 1;
  const Error e("something broke");
  EXPECT_STREQ(e.what(), "something broke");
  EXPECT_EQ(e.where(), "test_error.cpp:" + std::to_string(line));
  const StoreError s("store broke");  // the subclasses keep it too
  EXPECT_EQ(s.where().rfind("test_error.cpp:", 0), 0u) << s.where();
  const Error& base = s;
  EXPECT_STREQ(base.what(), "store broke");
}

TEST(Error, ConfigErrorListsOneIssuePerLine) {
  const ConfigError e({{"axes.lambda[2]", "must be finite"}, {"", "no [sweep] table"}, {"model.T", "must be >= 1"}});
  EXPECT_STREQ(e.what(), "axes.lambda[2]: must be finite\nno [sweep] table\nmodel.T: must be >= 1");
  ASSERT_EQ(e.issues().size(), 3u);
  EXPECT_EQ(e.issues()[0].key, "axes.lambda[2]");
  EXPECT_EQ(e.issues()[1].problem, "no [sweep] table");
  EXPECT_STREQ(ConfigError(std::vector<ConfigIssue>{}).what(), "");
  EXPECT_STREQ(ConfigError(std::vector<ConfigIssue>{{"k", "p"}}).what(), "k: p");
}

TEST(Error, LinalgErrorNamesTheRoutineAndInfo) {
  const LinalgError e("dgesdd", -4);
  EXPECT_STREQ(e.what(), "dgesdd failed with info = -4");
  EXPECT_EQ(e.routine(), "dgesdd");
  EXPECT_EQ(e.info(), -4);
  EXPECT_STREQ(LinalgError("dsyevd", 17).what(), "dsyevd failed with info = 17");
}

TEST(Error, OutOfMemoryIsBadAllocOrLengthErrorOnly) {
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(std::bad_array_new_length()));  // a bad_alloc
  EXPECT_TRUE(is_out_of_memory(std::length_error("vector")));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("x")));
  EXPECT_FALSE(is_out_of_memory(std::out_of_range("x")));
  EXPECT_FALSE(is_out_of_memory(StoreError("x")));
}

TEST(Error, OutOfMemoryMessageWithAndWithoutAnEstimate) {
  const std::runtime_error cause("std::bad_alloc");
  const std::string advice =
      "; give each rank more memory (see --mem-per-rank; fewer ranks per node) or make the tasks smaller";
  EXPECT_EQ(out_of_memory_message("writing results", cause, 0.0),
            "out of memory while writing results (std::bad_alloc)" + advice);
  EXPECT_EQ(out_of_memory_message("running the sweep", cause, 3.0 * 1024 * 1024 * 1024),
            "out of memory while running the sweep (std::bad_alloc): a rank needs about 3.0 GiB by the estimate of "
            "`rcsweep plan`" +
                advice);
  EXPECT_EQ(out_of_memory_message("x", cause, -1.0), "out of memory while x (std::bad_alloc)" + advice);
}

}  // namespace
}  // namespace rcsweep
