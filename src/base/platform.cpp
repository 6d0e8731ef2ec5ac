#include "base/platform.hpp"

#include <sys/resource.h>

#include <fstream>

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

}  // namespace rcsweep
