// A safetensors file (the format of Hugging Face's `safetensors`): an 8-byte little-endian header
// length N, N bytes of UTF-8 JSON mapping each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets into the data area, which starts right after the header) and an
// optional "__metadata__" map of strings, then the data area. The file is memory-mapped; the whole
// header is validated when the file is opened, before any tensor is used, and one tensor at a time
// is converted to float64 on request (docs/CHECKPOINTS.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/matrix.hpp"

namespace rcsweep::checkpoint {

class MappedFile;

/// The dtypes of the safetensors format. Every one is accepted in a header (its size is known, so
/// the offsets can be checked); only F64, F32, F16 and BF16 convert to float64.
enum class Dtype : std::uint8_t { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

/// "F16", "BF16", ... as written in a header.
std::string_view dtype_name(Dtype dtype) noexcept;
/// Bytes per element.
std::size_t dtype_size(Dtype dtype) noexcept;
/// The dtype named `name` (exact, case-sensitive), or nothing.
std::optional<Dtype> parse_dtype(std::string_view name) noexcept;
/// Whether `values` converts this dtype (F64, F32, F16, BF16).
bool is_convertible(Dtype dtype) noexcept;

/// IEEE 754 binary16 bits to the double of the same value (exact: zeros, subnormals, inf and NaN
/// with its sign and payload).
double half_to_double(std::uint16_t bits) noexcept;
/// bfloat16 bits (the high half of a binary32) to the double of the same value (exact; a NaN stays
/// a NaN of the same sign).
double bfloat16_to_double(std::uint16_t bits) noexcept;
/// Converts `out.size()` little-endian elements of `dtype` in `bytes` (any alignment) to double.
/// Throws Error when `bytes.size() != out.size() * dtype_size(dtype)` or the dtype is not convertible.
void convert_to_double(Dtype dtype, std::span<const std::byte> bytes, std::span<double> out);

/// One tensor of a header.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::size_t> shape;
  std::size_t elements = 0;  ///< product of shape (1 for a scalar)
  std::size_t begin = 0;     ///< byte offsets into the data area, end - begin = elements * dtype_size
  std::size_t end = 0;
};

/// Largest header accepted (the safetensors library's own limit).
inline constexpr std::size_t max_header_bytes = 100'000'000;
/// Deepest JSON nesting accepted in a header or config (a valid header has depth 3).
inline constexpr int max_json_depth = 64;

class SafetensorsFile {
 public:
  /// Maps `path` and validates its header. Throws ConfigError (key: the path; the problem names
  /// the tensor) on any problem: a file shorter than 8 bytes, a header length beyond the file or
  /// over max_header_bytes, a header that is not a JSON object, an entry without dtype, shape or
  /// data_offsets or with a wrong type, an unknown dtype, a shape whose size overflows, offsets
  /// outside the data area or reversed, a size other than elements × dtype size, overlapping
  /// tensors, a __metadata__ that is not a map of strings. Every problem of the header is listed.
  static SafetensorsFile open(const std::filesystem::path& path);
  /// The same checks on bytes already in memory (which must outlive the result); `file_name` names
  /// them in messages.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string file_name);

  const std::string& file() const noexcept { return file_; }
  /// The tensors, sorted by name.
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// Size of the whole file (what is mapped).
  std::size_t file_bytes() const noexcept { return bytes_.size(); }

  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  const TensorInfo* find(std::string_view name) const noexcept;
  /// The tensor `name`; ConfigError naming file and tensor when it is missing.
  const TensorInfo& tensor(std::string_view name) const;
  /// ConfigError naming file and tensor unless `name` exists with exactly this shape.
  void expect(std::string_view name, std::span<const std::size_t> shape) const;
  void expect(std::string_view name, std::initializer_list<std::size_t> shape) const {
    expect(name, std::span<const std::size_t>(shape.begin(), shape.size()));
  }
  /// The stored bytes of `name` (in the mapping: no copy).
  std::span<const std::byte> raw(std::string_view name) const;
  /// The elements of `name` as float64, row-major; ConfigError when missing or not convertible.
  std::vector<double> values(std::string_view name) const;
  /// The same into `out`, whose size must be the tensor's element count.
  void values(std::string_view name, std::span<double> out) const;
  /// A tensor of at most 2 dimensions as a Matrix: [r, c] is r × c, [n] is 1 × n, [] is 1 × 1.
  Matrix matrix(std::string_view name) const;
  /// Rows [first, first + count) of the 2-D tensor `name` as float64 into `out` (count × columns
  /// doubles, row-major), converting only those rows (an embedding's few rows of a large table).
  /// ConfigError naming file and tensor when it is missing, not 2-D or not a float; Error when the
  /// rows leave the tensor or `out` has another size.
  void rows(std::string_view name, std::size_t first, std::size_t count, std::span<double> out) const;

 private:
  SafetensorsFile() = default;
  void check_convertible(const TensorInfo& t) const;

  std::shared_ptr<const MappedFile> map_;  // null when parsed from caller's bytes
  std::span<const std::byte> bytes_;
  std::size_t data_start_ = 0;
  std::string file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// `name` in double quotes, control bytes, quotes and backslashes escaped as \xNN, cut after 200
/// bytes (for messages about names read from a file).
std::string quote_name(std::string_view name);
/// "[2, 3]" (for messages).
std::string shape_text(std::span<const std::size_t> shape);

}  // namespace rcsweep::checkpoint
