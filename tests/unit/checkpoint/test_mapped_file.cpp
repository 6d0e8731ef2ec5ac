// MappedFile: the bytes of the file, an empty file, and refusals naming the path.
#include "checkpoint/mapped_file.hpp"

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint_test_support.hpp"

namespace rcsweep::checkpoint {
namespace {

using test::config_error;
using test::TempDir;

TEST(MappedFile, MapsTheWholeFile) {
  TempDir dir;
  const std::string content = std::string("abc\0def", 7) + std::string(10000, 'x');
  test::write_bytes(dir / "f", content);
  const MappedFile map(dir / "f");
  ASSERT_EQ(map.size(), content.size());
  EXPECT_EQ(std::memcmp(map.bytes().data(), content.data(), content.size()), 0);
  EXPECT_EQ(map.path(), (dir / "f").string());
}

TEST(MappedFile, EmptyFileMapsNothing) {
  TempDir dir;
  test::write_bytes(dir / "empty", "");
  const MappedFile map(dir / "empty");
  EXPECT_EQ(map.size(), 0u);
  EXPECT_TRUE(map.bytes().empty());
}

TEST(MappedFile, RefusesMissingFilesAndFolders) {
  TempDir dir;
  const std::string missing = config_error([&] { MappedFile m(dir / "nope"); });
  EXPECT_NE(missing.find((dir / "nope").string() + ": cannot open"), std::string::npos) << missing;
  const std::string folder = config_error([&] { MappedFile m(dir.path()); });
  EXPECT_NE(folder.find("not a regular file"), std::string::npos) << folder;
}

}  // namespace
}  // namespace rcsweep::checkpoint
