#include "base/platform.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace rcsweep {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  const auto value = [&] {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const auto first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? std::string() : line.substr(first);
  };
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block ends at a blank line
    if (line.starts_with("model name"))
      name = value();
    else if (line.starts_with("cpu family"))
      family = value();
    else if (line.starts_with("model") && line.find_first_not_of(" \t", 5) == line.find(':'))
      model = value();
  }
  if (name.empty()) return "unknown CPU";
  if (!family.empty() && !model.empty()) name += " (family " + family + ", model " + model + ")";
  return name;
}

std::optional<double> address_space_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<double>(limit.rlim_cur);
}

namespace {
// The limit in the file `path`, or nothing when it is missing, "max" or beyond 2^60 (unlimited).
std::optional<double> limit_in(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    std::size_t used = 0;
    const double bytes = std::stod(text, &used);
    if (used != text.size() || !(bytes > 0.0) || bytes >= 0x1p60) return std::nullopt;
    return bytes;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}
}  // namespace

std::optional<double> cgroup_memory_limit(const std::filesystem::path& root, const std::filesystem::path& self) {
  std::ifstream in(self);
  std::string line;
  std::optional<double> smallest;
  while (std::getline(in, line)) {  // "id:controllers:path", v2 as "0::path"
    const auto a = line.find(':'), b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool v2 = line.substr(0, a) == "0" && controllers.empty();
    bool memory = false;
    for (std::size_t start = 0; start <= controllers.size();) {
      const auto comma = std::min(controllers.find(',', start), controllers.size());
      memory = memory || controllers.substr(start, comma - start) == "memory";
      start = comma + 1;
    }
    if (!v2 && !memory) continue;
    const std::filesystem::path base = v2 ? root : root / "memory";
    const char* file = v2 ? "memory.max" : "memory.limit_in_bytes";
    // The group and each of its ancestors (a group is limited by every one above it).
    std::filesystem::path group = std::filesystem::path(line.substr(b + 1)).relative_path();
    while (true) {
      if (const auto limit = limit_in(base / group / file); limit && (!smallest || *limit < *smallest))
        smallest = limit;
      if (group.empty()) break;
      group = group.has_parent_path() ? group.parent_path() : std::filesystem::path();
    }
  }
  return smallest;
}

}  // namespace rcsweep
