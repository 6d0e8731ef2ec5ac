// What the commands need to know of this machine: its memory and the threads OpenBLAS started.
#include "cli/cli_internal.hpp"

#include <unistd.h>

#include <algorithm>

#include "base/platform.hpp"
#include "linalg/linalg.hpp"

namespace rcsweep::cli {

double physical_memory_bytes() {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return std::min(physical, cgroup_memory_limit().value_or(physical));
}

int blas_load_threads() {
  const int n = linalg::set_blas_threads(1);
  linalg::set_blas_threads(n);
  return n;
}

}  // namespace rcsweep::cli
