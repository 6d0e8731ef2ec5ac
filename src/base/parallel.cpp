#include "base/parallel.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

namespace rcsweep::parallel {
namespace {
std::atomic<int> rank_threads{1};
}  // namespace

void set_threads(int n) {
  n = std::max(n, 1);
  rank_threads = n;
  omp_set_num_threads(n);
  omp_set_max_active_levels(1);  // parts do not nest: a part inside a part runs serially
}

int threads() { return rank_threads; }

int available_processors(int fallback) {
  if (omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0) return omp_get_num_places();
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : fallback;
}

int threads_from_environment() {
  const char* v = std::getenv("OMP_NUM_THREADS");
  if (!v || !*v) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || (*end != '\0' && *end != ',') || n < 1 || n > 4096) return 1;
  return static_cast<int>(n);
}

void for_each(std::size_t count, const std::function<void(std::size_t)>& body) {
  const int n_threads = threads();
  if (count < 2 || n_threads < 2 || omp_in_parallel()) {
    for (std::size_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::exception_ptr error;
  std::once_flag first_error;
  std::atomic<bool> failed{false};
  const auto n = static_cast<long>(count);
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min <long>(n_threads, n))
  for (long i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      body(static_cast<std::size_t>(i));
    } catch (...) {
      std::call_once(first_error, [&] { error = std::current_exception(); });
      failed = true;
    }
  }
  if (error) std::rethrow_exception(error);
}

Parts row_parts(std::size_t rows, std::size_t cols, std::size_t min_entries) {
  const std::size_t per_row = std::max<std::size_t>(cols, 1);
  const std::size_t size = std::max<std::size_t>(1, (min_entries + per_row - 1) / per_row);
  return {rows, std::min(size, std::max<std::size_t>(rows, 1))};
}

void for_rows(std::size_t rows, std::size_t cols, const std::function<void(std::size_t, std::size_t)>& body) {
  const Parts parts = row_parts(rows, cols);
  for_each(parts.count(), [&](std::size_t p) { body(parts.begin(p), parts.begin(p) + parts.length(p)); });
}

}  // namespace rcsweep::parallel
