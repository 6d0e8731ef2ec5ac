#include "base/error.hpp"

#include <filesystem>
#include <new>

#include "base/units.hpp"

namespace rcsweep {
namespace {
std::string format_where(const std::source_location& where) {
  return std::filesystem::path(where.file_name()).filename().string() + ":" + std::to_string(where.line());
}
std::string join_issues(const std::vector<ConfigIssue>& issues) {
  std::string out;
  for (const auto& issue : issues) {
    if (!out.empty()) out += '\n';
    out += issue.key.empty() ? issue.problem : issue.key + ": " + issue.problem;
  }
  return out;
}
}  // namespace

Error::Error(const std::string& what, std::source_location where)
    : std::runtime_error(what), where_(format_where(where)) {}

ConfigError::ConfigError(std::vector<ConfigIssue> issues, std::source_location where)
    : Error(join_issues(issues), where), issues_(std::move(issues)) {}

LinalgError::LinalgError(const std::string& routine, long info, std::source_location where)
    : Error(routine + " failed with info = " + std::to_string(info), where), routine_(routine), info_(info) {}

bool is_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr || dynamic_cast<const std::length_error*>(&e) != nullptr;
}

std::string out_of_memory_message(const std::string& what, const std::exception& e, double needs_bytes) {
  std::string text = "out of memory while " + what + " (" + e.what() + ")";
  if (needs_bytes > 0)
    text += ": a rank needs about " + human_bytes(needs_bytes) + " by the estimate of `rcsweep plan`";
  return text + "; give each rank more memory (see --mem-per-rank; fewer ranks per node) or make the tasks smaller";
}

}  // namespace rcsweep
