#include "sweep/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rcsweep::sweep {
namespace {
void format_duration(double s, char* out, std::size_t n) {
  if (s < 0 || s != s)
    std::snprintf(out, n, "?");
  else if (s < 90)
    std::snprintf(out, n, "%.0fs", s);
  else if (s < 5400) {
    const long total = static_cast<long>(s);
    std::snprintf(out, n, "%ldm%02lds", total / 60, total % 60);
  } else
    std::snprintf(out, n, "%.1fh", s / 3600);
}
}  // namespace

Progress::Progress(double total_flops, std::uint64_t total_tasks, bool enabled)
    : total_flops_(total_flops),
      total_tasks_(total_tasks),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {
  // Every second on a terminal, every 10 s into a log; RCSWEEP_PROGRESS_INTERVAL (seconds) overrides.
  interval_ = tty_ ? 1.0 : 10.0;
  if (const char* v = std::getenv("RCSWEEP_PROGRESS_INTERVAL")) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end != v && x > 0.0) interval_ = x;
  }
}

void Progress::add(double flops) {
  done_flops_ += flops;
  ++done_tasks_;
}

void Progress::drop(double flops) {
  total_flops_ -= flops;
  if (total_tasks_ > 0) --total_tasks_;
}

void Progress::report(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (!force && since < interval_) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double done = done_flops_ + partial_.load(std::memory_order_relaxed);
  const double frac = total_flops_ > 0 ? std::min(1.0, done / total_flops_) : 1.0;
  const double eta = frac > 0 ? elapsed * std::max(0.0, 1.0 - frac) / frac : -1.0;
  char el[32], et[32];
  format_duration(elapsed, el, sizeof el);
  format_duration(eta, et, sizeof et);
  std::fprintf(stderr, "%s[rcsweep] %llu/%llu tasks, %5.1f%% of work, elapsed %s, ETA %s%s%s", tty_ ? "\r" : "",
               static_cast<unsigned long long>(done_tasks_), static_cast<unsigned long long>(total_tasks_),
               100.0 * frac, el, bound_ && done_tasks_ < total_tasks_ ? "at most " : "", et,
               tty_ && !force ? "   " : "\n");
  std::fflush(stderr);
}

}  // namespace rcsweep::sweep
