#include "sweep/provenance.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "base/platform.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::sweep {

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string platform_text() { return linalg::blas_kernel() + '\n' + cpu_model() + '\n' + hostname(); }

store::Platform parse_platform(const std::string& text) {
  const auto nl = text.find('\n'), nl2 = text.find('\n', nl + 1);
  return {text.substr(0, nl), text.substr(nl + 1, nl2 - nl - 1), text.substr(nl2 + 1)};
}

KernelComparison compare_kernels(const std::vector<store::Platform>& ranks,
                                 const std::vector<std::pair<store::Platform, std::uint64_t>>& stored) {
  std::vector<std::string> mine, before;
  for (const auto& p : ranks)
    if (std::find(mine.begin(), mine.end(), p.blas_kernel) == mine.end()) mine.push_back(p.blas_kernel);
  KernelComparison c;
  for (const auto& [p, n] : stored) {
    if (p.empty()) continue;  // not recorded (a store made before /provenance)
    c.stored += (c.stored.empty() ? "" : ", ") + p.blas_kernel + " (" + std::to_string(n) + " tasks)";
    if (std::find(before.begin(), before.end(), p.blas_kernel) == before.end()) before.push_back(p.blas_kernel);
  }
  for (const auto& k : mine) c.kernels += (c.kernels.empty() ? "" : ", ") + k;
  c.mixed = mine.size() > 1;
  c.new_kernel = !before.empty() && std::any_of(mine.begin(), mine.end(), [&](const std::string& k) {
    return std::find(before.begin(), before.end(), k) == before.end();
  });
  return c;
}

void note_new_kernels(const EventSink& events, const std::vector<store::Platform>& ranks,
                      const std::vector<std::pair<store::Platform, std::uint64_t>>& stored) {
  const KernelComparison c = compare_kernels(ranks, stored);
  if (c.mixed || c.new_kernel) report(events, event::KernelsDiffer{c.kernels, c.stored, c.mixed, c.new_kernel});
}

}  // namespace rcsweep::sweep
