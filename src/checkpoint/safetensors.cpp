#include "checkpoint/safetensors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.hpp"
#include "checkpoint/mapped_file.hpp"
#include "checkpoint/model_config.hpp"

namespace rcsweep::checkpoint {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so must the host be");

namespace {

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DtypeEntry, 15> dtypes{{{Dtype::BOOL, "BOOL", 1},
                                             {Dtype::U8, "U8", 1},
                                             {Dtype::I8, "I8", 1},
                                             {Dtype::F8_E5M2, "F8_E5M2", 1},
                                             {Dtype::F8_E4M3, "F8_E4M3", 1},
                                             {Dtype::I16, "I16", 2},
                                             {Dtype::U16, "U16", 2},
                                             {Dtype::F16, "F16", 2},
                                             {Dtype::BF16, "BF16", 2},
                                             {Dtype::I32, "I32", 4},
                                             {Dtype::U32, "U32", 4},
                                             {Dtype::F32, "F32", 4},
                                             {Dtype::F64, "F64", 8},
                                             {Dtype::I64, "I64", 8},
                                             {Dtype::U64, "U64", 8}}};

// Problems of one header, each "tensor "name": problem"; at most max_listed are kept.
class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}
  void add(std::string problem) {
    if (issues_.size() < max_listed) issues_.push_back({file_, std::move(problem)});
    ++count_;
  }
  void tensor(std::string_view name, const std::string& problem) { add("tensor " + quote_name(name) + ": " + problem); }
  void throw_if_any() {
    if (count_ == 0) return;
    if (count_ > issues_.size())
      issues_.push_back({file_, "... and " + std::to_string(count_ - issues_.size()) + " more problems"});
    throw ConfigError(std::move(issues_));
  }

 private:
  static constexpr std::size_t max_listed = 20;
  std::string file_;
  std::vector<ConfigIssue> issues_;
  std::size_t count_ = 0;
};

[[noreturn]] void refuse(const std::string& file, const std::string& problem) { throw ConfigError({{file, problem}}); }

// A non-negative JSON integer (as size_t), or nothing.
std::optional<std::size_t> unsigned_value(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(SIZE_MAX)) return std::nullopt;
    return static_cast<std::size_t>(v);
  }
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::size_t>(j.get<std::int64_t>());
  return std::nullopt;
}

// Reads one entry into `t`; false (with its problems added) when it is not a valid entry.
bool read_entry(const std::string& name, const nlohmann::json& entry, std::size_t data_bytes, TensorInfo& t,
                Problems& problems) {
  t.name = name;
  if (!entry.is_object()) {
    problems.tensor(name, std::string("entry is a JSON ") + entry.type_name() + ", not an object");
    return false;
  }
  bool ok = true;
  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) {
    problems.tensor(name, "no \"dtype\"");
    ok = false;
  } else if (!dtype_it->is_string()) {
    problems.tensor(name, std::string("\"dtype\" is a JSON ") + dtype_it->type_name() + ", not a string");
    ok = false;
  } else if (const auto d = parse_dtype(dtype_it->get_ref<const std::string&>())) {
    t.dtype = *d;
  } else {
    problems.tensor(name, "unknown dtype " + quote_name(dtype_it->get_ref<const std::string&>()) +
                              " (the safetensors dtypes: F64, F32, F16, BF16, I64, ...)");
    ok = false;
  }

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) {
    problems.tensor(name, "no \"shape\"");
    ok = false;
  } else if (!shape_it->is_array()) {
    problems.tensor(name, std::string("\"shape\" is a JSON ") + shape_it->type_name() + ", not an array");
    ok = false;
  } else {
    t.elements = 1;
    bool overflow = false;
    for (const nlohmann::json& dim : *shape_it) {
      const auto v = unsigned_value(dim);
      if (!v) {
        problems.tensor(name, "\"shape\" holds " + (dim.is_number() ? dim.dump() : std::string(dim.type_name())) +
                                  ", not a non-negative integer");
        ok = false;
        break;
      }
      t.shape.push_back(*v);
      if (!overflow && __builtin_mul_overflow(t.elements, *v, &t.elements)) overflow = true;
    }
    if (ok && (overflow || t.elements > SIZE_MAX / 8)) {
      problems.tensor(name, "shape " + shape_text(t.shape) + " has more elements than any file can hold");
      ok = false;
    }
  }

  const auto off_it = entry.find("data_offsets");
  if (off_it == entry.end()) {
    problems.tensor(name, "no \"data_offsets\"");
    return false;
  }
  const auto begin = off_it->is_array() && off_it->size() == 2 ? unsigned_value((*off_it)[0]) : std::nullopt;
  const auto end = off_it->is_array() && off_it->size() == 2 ? unsigned_value((*off_it)[1]) : std::nullopt;
  if (!begin || !end) {
    problems.tensor(name, "\"data_offsets\" is not [begin, end] of two non-negative integers");
    return false;
  }
  t.begin = *begin;
  t.end = *end;
  const std::string offsets = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.end < t.begin) {
    problems.tensor(name, offsets + ": end before begin");
    return false;
  }
  if (t.end > data_bytes) {
    problems.tensor(name, offsets + " outside the data area of " + std::to_string(data_bytes) + " bytes");
    return false;
  }
  if (ok && t.elements * dtype_size(t.dtype) != t.end - t.begin) {
    problems.tensor(name, offsets + " hold " + std::to_string(t.end - t.begin) + " bytes, but " +
                              std::string(dtype_name(t.dtype)) + " " + shape_text(t.shape) + " needs " +
                              std::to_string(t.elements * dtype_size(t.dtype)));
    return false;
  }
  return ok;
}

}  // namespace

std::string_view dtype_name(Dtype dtype) noexcept { return dtypes[static_cast<std::size_t>(dtype)].name; }
std::size_t dtype_size(Dtype dtype) noexcept { return dtypes[static_cast<std::size_t>(dtype)].size; }

std::optional<Dtype> parse_dtype(std::string_view name) noexcept {
  for (const DtypeEntry& e : dtypes)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

bool is_convertible(Dtype dtype) noexcept {
  return dtype == Dtype::F64 || dtype == Dtype::F32 || dtype == Dtype::F16 || dtype == Dtype::BF16;
}

// Branch-free so that the conversion loops vectorise: the three cases are computed and selected.
double half_to_double(std::uint16_t bits) noexcept {
  const std::uint64_t sign = static_cast<std::uint64_t>(bits & 0x8000u) << 48;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint64_t mantissa = bits & 0x3ffu;
  // exponent 0: zero or subnormal, mantissa × 2^-24 (exact: mantissa < 2^10)
  const std::uint64_t small = std::bit_cast<std::uint64_t>(static_cast<double>(static_cast<std::int32_t>(mantissa)) *
                                                           0x1p-24);
  // exponent 31: inf (mantissa 0) or NaN with the payload in the top mantissa bits
  const std::uint64_t special = (std::uint64_t{0x7ff} << 52) | (mantissa << 42);
  // otherwise (1 + mantissa/2^10) × 2^(exponent - 15): rebias 15 -> 1023
  const std::uint64_t normal = (static_cast<std::uint64_t>(exponent + (1023 - 15)) << 52) | (mantissa << 42);
  // Masks rather than ?: so that g++ vectorises the loops calling this.
  const std::uint64_t is_small = std::uint64_t{0} - static_cast<std::uint64_t>(exponent == 0);
  const std::uint64_t is_special = std::uint64_t{0} - static_cast<std::uint64_t>(exponent == 31);
  const std::uint64_t magnitude = (small & is_small) | (special & is_special) | (normal & ~(is_small | is_special));
  return std::bit_cast<double>(sign | magnitude);
}

double bfloat16_to_double(std::uint16_t bits) noexcept {
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
}

namespace {
// o[i] = to_double(the i-th Stored of `in`), read unaligned; a loop the compiler vectorises.
template <class Stored, class ToDouble>
void convert_each(const std::byte* in, std::size_t n, double* o, ToDouble to_double) {
  for (std::size_t i = 0; i < n; ++i) {
    Stored v;
    std::memcpy(&v, in + sizeof(Stored) * i, sizeof(Stored));
    o[i] = to_double(v);
  }
}
}  // namespace

void convert_to_double(Dtype dtype, std::span<const std::byte> bytes, std::span<double> out) {
  const std::size_t n = out.size();
  if (!is_convertible(dtype))
    throw Error("convert_to_double: dtype " + std::string(dtype_name(dtype)) + " is not a float");
  if (bytes.size() / dtype_size(dtype) != n || bytes.size() % dtype_size(dtype) != 0)
    throw Error("convert_to_double: " + std::to_string(bytes.size()) + " bytes for " + std::to_string(n) +
                " elements of " + std::string(dtype_name(dtype)));
  const std::byte* in = bytes.data();
  double* o = out.data();
  switch (dtype) {
    case Dtype::F64:
      if (n > 0) std::memcpy(o, in, n * sizeof(double));
      break;
    case Dtype::F32: convert_each<float>(in, n, o, [](float v) { return static_cast<double>(v); }); break;
    case Dtype::F16: convert_each<std::uint16_t>(in, n, o, half_to_double); break;
    case Dtype::BF16: convert_each<std::uint16_t>(in, n, o, bfloat16_to_double); break;
    default: break;
  }
}

std::string shape_text(std::span<const std::size_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string quote_name(std::string_view name) {
  // A name from a hostile file may hold control bytes; print them escaped, and not endlessly.
  std::string out = "\"";
  for (std::size_t i = 0; i < name.size() && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 200) out += "...";
  return out + "\"";
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto map = std::make_shared<const MappedFile>(path);
  SafetensorsFile file = parse(map->bytes(), path.string());
  file.map_ = std::move(map);
  return file;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string file_name) {
  SafetensorsFile file;
  file.file_ = std::move(file_name);
  file.bytes_ = bytes;
  const std::string& name = file.file_;
  if (bytes.size() < 8)
    refuse(name,
           "not a safetensors file: " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  if (header_bytes > max_header_bytes)
    refuse(name, "header length " + std::to_string(header_bytes) + " is absurd (more than " +
                     std::to_string(max_header_bytes) + " bytes): not a safetensors file, or a damaged one");
  if (header_bytes > bytes.size() - 8)
    refuse(name, "header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes): truncated or not a safetensors file");
  file.data_start_ = 8 + static_cast<std::size_t>(header_bytes);
  const std::size_t data_bytes = bytes.size() - file.data_start_;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(header_bytes));
  const nlohmann::json header = parse_json_object(text, name, "the header");

  Problems problems(name);
  file.tensors_.reserve(header.size());
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) {
        problems.add(std::string("\"__metadata__\" is a JSON ") + entry.type_name() + ", not a map of strings");
        continue;
      }
      for (const auto& [mk, mv] : entry.items()) {
        if (mv.is_string())
          file.metadata_.emplace(mk, mv.get<std::string>());
        else
          problems.add("\"__metadata__\" entry " + quote_name(mk) + " is a JSON " + mv.type_name() + ", not a string");
      }
      continue;
    }
    TensorInfo t;
    if (read_entry(key, entry, data_bytes, t, problems)) file.tensors_.push_back(std::move(t));
  }
  problems.throw_if_any();

  // Overlaps: by begin, each tensor must start at or after the end of the one before it.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(file.tensors_.size());
  for (const TensorInfo& t : file.tensors_)
    if (t.end > t.begin) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.begin < a.end)
      problems.tensor(b.name, "data_offsets [" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
                                  "] overlap those of tensor " + quote_name(a.name) + " [" + std::to_string(a.begin) +
                                  ", " + std::to_string(a.end) + "]");
  }
  problems.throw_if_any();
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const noexcept {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                   [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& SafetensorsFile::tensor(std::string_view name) const {
  if (const TensorInfo* t = find(name)) return *t;
  refuse(file_,
         "tensor " + quote_name(name) + " is missing (the file holds " + std::to_string(tensors_.size()) + " tensors)");
}

void SafetensorsFile::expect(std::string_view name, std::span<const std::size_t> shape) const {
  const TensorInfo& t = tensor(name);
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()))
    refuse(file_,
           "tensor " + quote_name(name) + " has shape " + shape_text(t.shape) + ", expected " + shape_text(shape));
}

std::span<const std::byte> SafetensorsFile::raw(std::string_view name) const {
  const TensorInfo& t = tensor(name);
  return bytes_.subspan(data_start_ + t.begin, t.end - t.begin);
}

void SafetensorsFile::check_convertible(const TensorInfo& t) const {
  if (!is_convertible(t.dtype))
    refuse(file_, "tensor " + quote_name(t.name) + " has dtype " + std::string(dtype_name(t.dtype)) +
                      ", not a float (F64, F32, F16 or BF16)");
}

void SafetensorsFile::values(std::string_view name, std::span<double> out) const {
  const TensorInfo& t = tensor(name);
  check_convertible(t);
  if (out.size() != t.elements)
    throw Error("SafetensorsFile::values: " + std::to_string(out.size()) + " doubles for tensor " + quote_name(name) +
                " of " + std::to_string(t.elements) + " elements");
  convert_to_double(t.dtype, raw(name), out);
}

std::vector<double> SafetensorsFile::values(std::string_view name) const {
  const TensorInfo& t = tensor(name);
  check_convertible(t);
  std::vector<double> out(t.elements);
  values(name, out);
  return out;
}

Matrix SafetensorsFile::matrix(std::string_view name) const {
  const TensorInfo& t = tensor(name);
  check_convertible(t);
  if (t.shape.size() > 2)
    refuse(file_,
           "tensor " + quote_name(name) + " has shape " + shape_text(t.shape) + ", not a matrix (1 or 2 dimensions)");
  const std::size_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  const std::size_t cols = t.shape.empty() ? 1 : t.shape.back();
  Matrix m(rows, cols, Matrix::uninitialized);
  values(name, m.values());
  return m;
}

void SafetensorsFile::rows(std::string_view name, std::size_t first, std::size_t count, std::span<double> out) const {
  const TensorInfo& t = tensor(name);
  check_convertible(t);
  if (t.shape.size() != 2)
    refuse(file_, "tensor " + quote_name(name) + " has shape " + shape_text(t.shape) + ", not 2-D: it has no rows");
  const std::size_t rows = t.shape[0], cols = t.shape[1];
  if (first > rows || count > rows - first)
    throw Error("SafetensorsFile::rows: rows [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                std::to_string(count) + ") of tensor " + quote_name(name) + " of " + std::to_string(rows) + " rows");
  if (out.size() != count * cols)
    throw Error("SafetensorsFile::rows: " + std::to_string(out.size()) + " doubles for " + std::to_string(count) +
                " rows of " + std::to_string(cols) + " of tensor " + quote_name(name));
  const std::size_t row_bytes = cols * dtype_size(t.dtype);
  convert_to_double(t.dtype, raw(name).subspan(first * row_bytes, count * row_bytes), out);
}

}  // namespace rcsweep::checkpoint
