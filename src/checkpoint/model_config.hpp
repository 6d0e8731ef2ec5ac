// A model folder's config.json (Hugging Face's PretrainedConfig as JSON): the raw object, and
// typed accessors that refuse a missing or mistyped key with a ConfigError naming file and key.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rcsweep::checkpoint {

/// Largest config.json or index file read (real ones are a few KiB).
inline constexpr std::size_t max_json_file_bytes = 16u << 20;

/// Deepest nesting of arrays and objects in `text` (0 for a scalar), strings skipped; for text
/// that is not JSON, the depth of its brackets outside strings.
int json_nesting_depth(std::string_view text) noexcept;

/// `text` parsed as a JSON object. Throws ConfigError (key: `file`) when it is not JSON, nested
/// deeper than max_json_depth (safetensors.hpp), or not an object; `what` names it ("the header").
nlohmann::json parse_json_object(std::string_view text, const std::string& file, std::string_view what);

/// The text of a small file (at most max_json_file_bytes); ConfigError naming it otherwise.
std::string read_small_file(const std::filesystem::path& path);

class ModelConfig {
 public:
  /// Reads and parses `path` (a JSON object). ConfigError naming the file on any problem.
  static ModelConfig load(const std::filesystem::path& path);
  /// The same from text; `file` names it in messages.
  static ModelConfig parse(std::string_view text, std::string file);

  const std::string& file() const noexcept { return file_; }
  /// The whole object (include <nlohmann/json.hpp> to use it).
  const nlohmann::json& json() const noexcept { return *json_; }

  /// Whether `key` is present and not null.
  bool has(std::string_view key) const;
  /// The integer at `key` (a JSON integer; 768.0 is refused). ConfigError naming file and key when
  /// it is missing, null or of another type.
  std::int64_t integer(std::string_view key) const;
  /// The number at `key` (integer or floating point).
  double number(std::string_view key) const;
  std::string string(std::string_view key) const;
  bool boolean(std::string_view key) const;
  /// An array of strings ("architectures").
  std::vector<std::string> strings(std::string_view key) const;
  /// The same with a fallback for a missing or null key; a key of another type is still refused.
  std::int64_t integer(std::string_view key, std::int64_t fallback) const;
  double number(std::string_view key, double fallback) const;
  std::string string(std::string_view key, const std::string& fallback) const;
  bool boolean(std::string_view key, bool fallback) const;

 private:
  ModelConfig() = default;
  const nlohmann::json* value(std::string_view key) const;  // null when missing or JSON null
  [[noreturn]] void refuse(std::string_view key, const std::string& problem) const;
  const nlohmann::json& required(std::string_view key) const;

  std::string file_;
  std::shared_ptr<const nlohmann::json> json_;
};

}  // namespace rcsweep::checkpoint
