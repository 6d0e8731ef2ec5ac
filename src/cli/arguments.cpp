// The values of command-line options that the subcommands parse themselves: sizes and shards.
#include "cli/commands.hpp"

#include <cctype>
#include <cmath>
#include <string>

#include "base/error.hpp"

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

}  // namespace rcsweep::cli
