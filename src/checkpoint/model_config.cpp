#include "checkpoint/model_config.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "checkpoint/safetensors.hpp"

namespace rcsweep::checkpoint {

int json_nesting_depth(std::string_view text) noexcept {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      depth = std::max(depth - 1, 0);
    }
  }
  return deepest;
}

nlohmann::json parse_json_object(std::string_view text, const std::string& file, std::string_view what) {
  // nlohmann's parser is iterative, but checking the nesting first keeps any recursive use of
  // the result (and the memory of a document of a million brackets) away from hostile input.
  if (json_nesting_depth(text) > max_json_depth)
    throw ConfigError({{file, std::string(what) + " is nested more than " + std::to_string(max_json_depth) +
                                  " levels deep: not a valid file"}});
  // Exceptions, not allow_exceptions=false: nlohmann-json 3.11 throws out_of_range.406 for a
  // number too large for a double (1e400) even then.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // Its message quotes the input ("last read: '...'", the whole overflowing number): cut and
    // made printable.
    std::string detail = e.what();
    if (detail.size() > 300) detail = detail.substr(0, 300) + "...";
    for (char& c : detail)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    throw ConfigError({{file, std::string(what) + " is not valid JSON: " + detail}});
  }
  if (!j.is_object())
    throw ConfigError({{file, std::string(what) + " is a JSON " + j.type_name() + ", not an object"}});
  return j;
}

std::string read_small_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw ConfigError({{path.string(), "no such file"}});
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw ConfigError({{path.string(), "cannot read its size: " + ec.message()}});
  if (size > max_json_file_bytes)
    throw ConfigError({{path.string(), "is " + std::to_string(size) + " bytes, more than the " +
                                           std::to_string(max_json_file_bytes) + " a JSON file of a model may have"}});
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
    throw ConfigError({{path.string(), "cannot be read"}});
  return text;
}

ModelConfig ModelConfig::load(const std::filesystem::path& path) { return parse(read_small_file(path), path.string()); }

ModelConfig ModelConfig::parse(std::string_view text, std::string file) {
  ModelConfig config;
  config.json_ = std::make_shared<const nlohmann::json>(parse_json_object(text, file, "the configuration"));
  config.file_ = std::move(file);
  return config;
}

const nlohmann::json* ModelConfig::value(std::string_view key) const {
  const auto it = json_->find(key);
  return it == json_->end() || it->is_null() ? nullptr : &*it;
}

void ModelConfig::refuse(std::string_view key, const std::string& problem) const {
  throw ConfigError({{file_, "key \"" + std::string(key) + "\" " + problem}});
}

const nlohmann::json& ModelConfig::required(std::string_view key) const {
  const nlohmann::json* v = value(key);
  if (v == nullptr) refuse(key, json_->contains(key) ? "is null" : "is missing");
  return *v;
}

bool ModelConfig::has(std::string_view key) const { return value(key) != nullptr; }

namespace {
std::string type_problem(const nlohmann::json& v, const char* wanted) {
  return std::string("is a JSON ") + (v.is_number_float() ? "floating-point number" : v.type_name()) + ", not " +
         wanted;
}
}  // namespace

std::int64_t ModelConfig::integer(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v.get<std::uint64_t>());
  if (v.is_number_unsigned()) refuse(key, "is " + v.dump() + ", too large");
  refuse(key, type_problem(v, "an integer"));
}

double ModelConfig::number(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_number()) refuse(key, type_problem(v, "a number"));
  return v.get<double>();
}

std::string ModelConfig::string(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_string()) refuse(key, type_problem(v, "a string"));
  return v.get<std::string>();
}

bool ModelConfig::boolean(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_boolean()) refuse(key, type_problem(v, "true or false"));
  return v.get<bool>();
}

std::vector<std::string> ModelConfig::strings(std::string_view key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_array()) refuse(key, type_problem(v, "an array of strings"));
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string()) refuse(key, "holds a JSON " + std::string(s.type_name()) + ", not only strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::int64_t ModelConfig::integer(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}
double ModelConfig::number(std::string_view key, double fallback) const { return has(key) ? number(key) : fallback; }
std::string ModelConfig::string(std::string_view key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}
bool ModelConfig::boolean(std::string_view key, bool fallback) const { return has(key) ? boolean(key) : fallback; }

}  // namespace rcsweep::checkpoint
