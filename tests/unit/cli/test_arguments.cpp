// The option values the commands read themselves (src/cli/arguments.cpp): sizes, shards and the
// store path of --output, each refusal a ConfigError on the option's key (exit code 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.hpp"
#include "cli/cli_internal.hpp"
#include "cli/commands.hpp"

namespace rcsweep::cli {
namespace {

/// "key: problem" of the one issue of the ConfigError `f` throws; a marker otherwise.
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.issues().size() == 1 ? e.issues()[0].key + ": " + e.issues()[0].problem : e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "NO EXCEPTION";
}

TEST(ParseBytes, UnitsArePowersOf1024) {
  EXPECT_EQ(parse_bytes("512", "--m"), 512.0);
  EXPECT_EQ(parse_bytes("4K", "--m"), 4096.0);
  EXPECT_EQ(parse_bytes("512M", "--m"), 512.0 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("2GiB", "--m"), 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1.5g", "--m"), 1.5 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1T", "--m"), 1024.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("3b", "--m"), 3.0);
}

TEST(ParseBytes, RefusalsNameTheOption) {
  const std::string expected = "expected a size like 4G, 512M, 2GiB or a number of bytes, got '";
  for (const char* bad : {"", "G", "4X", "4GG", "0", "-1G", "+4G", "nan", "inf", "1e400"})
    EXPECT_EQ(refusal([&] { parse_bytes(bad, "--mem-per-rank"); }), "--mem-per-rank: " + expected + bad + "'") << bad;
}

TEST(ParseShard, IndexAndCount) {
  const plan::Shard s = parse_shard("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(parse_shard("0/1").count, 1);
  for (const char* bad : {"", "1", "5/5", "-1/2", "0/0", "1/2x", "a/b", "1 /2", "1/"})
    EXPECT_EQ(refusal([&] { parse_shard(bad); }),
              std::string("--shard: expected i/n with 0 <= i < n, got '") + bad + "'")
        << bad;
}

TEST(CheckStorePath, MissingIsANewStoreAndALinkLoopIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("rcsweep-test-arguments-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  std::filesystem::create_symlink("loop", dir / "loop");
  EXPECT_NO_THROW(check_store_path(dir / "new.h5"));
  EXPECT_NO_THROW(check_store_path(dir / "file"));
  const std::string refused = refusal([&] { check_store_path(dir / "loop"); });
  EXPECT_EQ(refused.rfind("--output: " + (dir / "loop").string() + ": ", 0), 0u) << refused;
  const std::string too_long = refusal([&] { check_store_path(dir / std::string(300, 'x')); });
  EXPECT_EQ(too_long.rfind("--output: ", 0), 0u) << too_long;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rcsweep::cli
