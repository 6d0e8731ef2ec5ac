// A whole file mapped read-only into memory (mmap, MAP_PRIVATE): the bytes of a checkpoint are
// read by the page cache on first touch and never copied.
#pragma once
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace rcsweep::checkpoint {

class MappedFile {
 public:
  /// Maps `path` read-only. An empty file gives an empty span (nothing is mapped).
  /// Throws ConfigError (key: the path) when the file cannot be opened, is not a regular file, or
  /// cannot be mapped. A file truncated by another process while mapped raises SIGBUS on access
  /// (docs/CHECKPOINTS.md "Memory").
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rcsweep::checkpoint
