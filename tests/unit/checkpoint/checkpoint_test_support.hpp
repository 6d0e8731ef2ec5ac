// Tiny safetensors files and model folders written byte by byte (the header as literal JSON text,
// so that malformed headers can be written too), in a fresh temporary folder per test.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace rcsweep::checkpoint::test {

/// A temporary folder removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rcsweep-checkpoint-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// 8-byte little-endian length, then `header`, then `data` (the host is little-endian).
inline std::string safetensors_bytes(const std::string& header, const std::string& data, std::uint64_t length) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &length, 8);
  return out + header + data;
}
inline std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  return safetensors_bytes(header, data, header.size());
}

/// Tensors laid out one after the other: add() appends to the data area and the header.
class Writer {
 public:
  Writer& add(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& data) {
    const std::size_t begin = data_.size();
    data_ += data;
    entries_ += (entries_.empty() ? "" : ",") +
                ("\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
                 std::to_string(begin) + "," + std::to_string(data_.size()) + "]}");
    return *this;
  }
  Writer& metadata(const std::string& json_object) {
    metadata_ = json_object;
    return *this;
  }
  std::string header() const {
    return "{" + (metadata_.empty() ? "" : "\"__metadata__\":" + metadata_ + (entries_.empty() ? "" : ",")) + entries_ +
           "}";
  }
  std::string bytes() const { return safetensors_bytes(header(), data_); }
  void write(const std::filesystem::path& path) const { write_bytes(path, bytes()); }

 private:
  std::string entries_, data_, metadata_;
};

/// The message of the ConfigError that `f` throws (a failure when it throws none).
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

}  // namespace rcsweep::checkpoint::test
