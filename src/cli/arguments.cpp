// The values of command-line options that the subcommands parse themselves: sizes, shards and the
// store path of --output.
#include "cli/commands.hpp"

#include <cctype>
#include <cmath>
#include <string>
#include <system_error>

#include "base/error.hpp"
#include "cli/cli_internal.hpp"
#include "config/params.hpp"

namespace rcsweep::cli {

double parse_bytes(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return ConfigError({{what, "expected a size like 4G, 512M, 2GiB or a number of bytes, got '" + text + "'"}});
  };
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();  // GiB = G
  double scale = 1.0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const auto k = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) throw bad();
    scale = std::pow(1024.0, static_cast<double>(k + 1));
  } else if (!unit.empty()) {
    throw bad();
  }
  if (!(value > 0.0) || text[0] == '+' || !std::isfinite(value * scale)) throw bad();
  return value * scale;
}

plan::Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      std::size_t a = 0, b = 0;
      const int i = std::stoi(text.substr(0, slash), &a);
      const int n = std::stoi(text.substr(slash + 1), &b);
      if (a == slash && b == text.size() - slash - 1 && n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  throw ConfigError({{"--shard", "expected i/n with 0 <= i < n, got '" + text + "'"}});
}

void check_store_path(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && st.type() != std::filesystem::file_type::not_found)
    throw ConfigError({{"--output", config::printable(path.string()) + ": " + ec.message()}});
}

}  // namespace rcsweep::cli
